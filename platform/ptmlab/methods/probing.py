"""The probes' declarations (`stage.token`, `stage.structural` of stage=probe): the probe stage
builds them, so they are nodes of its stage node, not `_target_`s. Each probe class in
lightning_modules/probing/ names its declaration."""

from __future__ import annotations

from typing import Literal

from ptmlab.methods.fields import Dropout, Node, NonNegativeFloat, PositiveFloat, PositiveInt


class TokenProbeParams(Node):
    """`stage.token`: the probe (linear or MLP) and its fit; its control task and scalar mix."""

    kind: Literal["linear", "mlp"] = "linear"
    hidden_size: PositiveInt = 256
    dropout: Dropout = 0.0
    epochs: PositiveInt = 6
    lr: PositiveFloat = 3e-3
    batch_size: PositiveInt = 512
    weight_decay: NonNegativeFloat = 0.0
    control: bool = True
    scalar_mix: bool = True


class StructuralProbeParams(Node):
    """`stage.structural`: the distance and depth probes' rank (Hewitt & Manning) and their fit."""

    rank: PositiveInt = 64
    epochs: PositiveInt = 10
    lr: PositiveFloat = 1e-3
    batch_size: PositiveInt = 20
    weight_decay: NonNegativeFloat = 0.0


PROBES = {
    "lightning_modules.probing.token.TokenProbe": TokenProbeParams,
    "lightning_modules.probing.structural.DistanceProbe": StructuralProbeParams,
}

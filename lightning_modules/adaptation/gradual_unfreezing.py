"""Gradual unfreezing (ULMFiT, Howard & Ruder 2018): only the head trains at first; every
`unfreeze_every` steps one more layer is unfrozen, from the top down, then the embeddings.
All parameters are in the optimizer from the start (frozen ones simply get no gradient), so
unfreezing needs no optimizer rebuild."""

from __future__ import annotations

from typing import Any

from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from lightning_modules.optim import decay_param_groups
from ptmlab.methods.adaptation import GradualUnfreezingParams


class GradualUnfreezing(Adaptation):
    declaration = GradualUnfreezingParams

    name = "gradual_unfreezing"
    takes_declaration = True

    def __init__(self, params: GradualUnfreezingParams | None = None, **values: Any):
        self.params = self.declared_params(params, values)
        self.unfreeze_every = self.params.unfreeze_every

    def stages(self, model: nn.Module) -> list[list[nn.Module]]:
        """What is unfrozen at each stage: head, then top layer, ..., bottom layer, embeddings."""
        layers = model.backbone.layer_modules()
        return [[model.head], *[[layer] for layer in reversed(layers)], model.backbone.embedding_modules()]

    def prepare(self, model: nn.Module) -> None:
        set_trainable([model], False)
        self.on_train_step(model, 0, 0)

    def param_groups(self, model: nn.Module, lr: float, weight_decay: float) -> list[dict]:

        # Frozen-now parameters are in the optimizer already; they train once unfrozen.
        return decay_param_groups(model.named_parameters(), weight_decay, lr=lr, include_frozen=True)

    def on_train_step(self, model: nn.Module, step: int, total_steps: int) -> None:
        stages = self.stages(model)
        unfrozen = min(len(stages), 1 + step // self.unfreeze_every)
        for modules in stages[:unfrozen]:
            set_trainable(modules, True)

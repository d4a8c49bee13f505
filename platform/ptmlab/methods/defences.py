"""`defence`: one declaration per defence class (lightning_modules/adaptation/adversarial.py:
FreeLB, PGD-K in embedding space; lightning_modules/attacks/augmentation.py: training on
attack-augmented data). Where a defence may go (a fine-tune whose adaptation trains) is a
cross-group check, ptmlab.config_schema.defence's."""

from __future__ import annotations

from typing import Literal

from ptmlab.methods.fields import Name, NonNegativeFloat, PositiveInt, TargetNode


class FreeLBParams(TargetNode):
    name: Name
    adv_k: PositiveInt = 2
    adv_lr: NonNegativeFloat = 0.1
    adv_init_mag: NonNegativeFloat = 0.6
    adv_max_norm: NonNegativeFloat = 0.0  # 0: unbounded
    adv_norm_type: Literal["l2", "linf"] = "l2"
    same_dropout_mask: bool = True


class PGDParams(FreeLBParams):
    adv_init_mag: NonNegativeFloat = 1.0
    adv_max_norm: NonNegativeFloat = 0.6


class AttackAugmentationParams(TargetNode):
    name: Name
    source: Name  # a stage=attack run folder (its records on the training split)
    include_failed: bool = False
    max_examples: PositiveInt | None = None


_D = "lightning_modules.adaptation.adversarial."
DEFENCES = {
    _D + "FreeLB": FreeLBParams,
    _D + "PGD": PGDParams,
    "lightning_modules.attacks.augmentation.AttackAugmentation": AttackAugmentationParams,
}

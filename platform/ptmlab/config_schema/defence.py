"""`defence` (lightning_modules/adaptation/adversarial.py: FreeLB, PGD-K in embedding space;
lightning_modules/attacks/augmentation.py: training on attack-augmented data), and where it may
go: a fine-tune whose adaptation trains. A bad value or combination fails here, at compose time
(exit 2 / HTTP 422, nothing run); a source that is not an attack run, before the run opens."""

from __future__ import annotations

from typing import Literal

from ptmlab.config_schema.fields import Name, NonNegativeFloat, PositiveInt, TargetNode


class AdversarialTraining(TargetNode):
    name: Name
    adv_k: PositiveInt = 2
    adv_lr: NonNegativeFloat = 0.1
    adv_init_mag: NonNegativeFloat = 0.6
    adv_max_norm: NonNegativeFloat = 0.0      # 0: unbounded
    adv_norm_type: Literal["l2", "linf"] = "l2"
    same_dropout_mask: bool = True


class PGDTraining(AdversarialTraining):
    adv_init_mag: NonNegativeFloat = 1.0
    adv_max_norm: NonNegativeFloat = 0.6


class AttackAugmentation(TargetNode):
    name: Name
    source: Name                       # a stage=attack run folder (its records on the training split)
    include_failed: bool = False
    max_examples: PositiveInt | None = None


_D = "lightning_modules.adaptation.adversarial."
DEFENCES = {_D + "FreeLB": AdversarialTraining, _D + "PGD": PGDTraining,
            "lightning_modules.attacks.augmentation.AttackAugmentation": AttackAugmentation}
MULTITASK_ENTRY = "lightning_modules.stages.multitask.run_multitask"
NOT_TRAINING = {"lightning_modules.adaptation.prompt_based.ZeroShotPrompting", "lightning_modules.adaptation.zero_shot.ZeroShot"}


def check_defence(plain: dict) -> list[str]:
    """Adversarial training only where it can run: a fine-tune whose adaptation trains. Stages that
    train no task model ignore the group, as they ignore `task` or `attack`; multitask, which
    trains, refuses it rather than train without it."""
    node = plain.get("defence")
    if not isinstance(node, dict):
        return []
    name = node.get("name", "?")
    if (plain.get("stage") or {}).get("entry") == MULTITASK_ENTRY:
        return [f"defence={name} with stage=multitask: adversarial training is a stage=finetune option"]
    adaptation = plain.get("adaptation") or {}
    if adaptation.get("_target_") in NOT_TRAINING:
        return [f"defence={name} with adaptation={adaptation.get('name')}: the adaptation does not train, "
                f"so there is nothing to train adversarially"]
    return []

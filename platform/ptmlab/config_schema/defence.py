"""Where a `defence` may go (its keys are declared in ptmlab.methods.defences): a fine-tune whose
adaptation trains. A bad combination fails here, at compose time (exit 2 / HTTP 422, nothing run); a
source that is not an attack run, before the run opens."""

from __future__ import annotations

MULTITASK_ENTRY = "lightning_modules.stages.multitask.run_multitask"
NOT_TRAINING = {
    "lightning_modules.adaptation.prompt_based.ZeroShotPrompting",
    "lightning_modules.adaptation.zero_shot.ZeroShot",
}


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
        return [
            f"defence={name} with adaptation={adaptation.get('name')}: the adaptation does not train, "
            f"so there is nothing to train adversarially"
        ]
    return []

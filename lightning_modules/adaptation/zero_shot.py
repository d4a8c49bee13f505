"""Zero-shot multiple choice (adaptation=zero_shot): the pre-trained decoder as it is, each choice
scored by its summed log-likelihood given the context (task.choice_scoring=log_likelihood,
heads/multiple_choice_model.py), as lm-evaluation-harness scores `acc` and `acc_norm`. Nothing
trains (`trains = False`: the finetune stage validates and predicts without fitting), so the task
model it exports is the backbone with a weightless head."""

from __future__ import annotations

from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from ptmlab.contracts import ConfigError
from ptmlab.methods.adaptation import AdaptationParams


class ZeroShot(Adaptation):
    declaration = AdaptationParams

    name = "zero_shot"
    trains = False

    def bind(self, task, resolved) -> None:
        spec = task.spec
        if not spec.is_multiple_choice or not resolved.backbone.is_causal or spec.choice_scoring == "head":
            raise ConfigError(
                f"adaptation=zero_shot scores choices by a causal decoder's log-likelihood: it needs "
                f"task.kind=multiple_choice (task {spec.name} is {spec.kind}), a decoder backbone "
                f"(causal: {bool(resolved.backbone.is_causal)}) and task.choice_scoring auto or "
                f"log_likelihood (is {spec.choice_scoring}); a classification head would be untrained"
            )

    def prepare(self, model: nn.Module) -> None:
        set_trainable([model], False)

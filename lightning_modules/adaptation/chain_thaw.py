"""Chain-thaw (Felbo et al. 2017): train the head alone, then each layer alone in turn from
the bottom up (everything else frozen), then the whole model — each phase
`steps_per_phase` steps."""

from __future__ import annotations

from typing import Any

from torch import nn

from lightning_modules.adaptation.base import set_trainable
from lightning_modules.adaptation.gradual_unfreezing import GradualUnfreezing
from ptmlab.methods.adaptation import ChainThawParams


class ChainThaw(GradualUnfreezing):
    declaration = ChainThawParams

    name = "chain_thaw"
    takes_declaration = True

    def __init__(self, params: ChainThawParams | None = None, **values: Any):
        self.params = self.declared_params(params, values)
        self.unfreeze_every = self.params.steps_per_phase

    def phases(self, model: nn.Module) -> list[list[nn.Module]]:
        layers = model.backbone.layer_modules()
        return [[model.head], model.backbone.embedding_modules(), *[[layer] for layer in layers], [model]]

    def on_train_step(self, model: nn.Module, step: int, total_steps: int) -> None:
        phases = self.phases(model)
        phase = min(len(phases) - 1, step // self.unfreeze_every)
        set_trainable([model], False)
        set_trainable(phases[phase], True)

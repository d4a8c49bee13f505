"""BitFit (Ben Zaken et al. 2021): only the bias terms of the backbone train, with the task head.
Every backbone Linear, LayerNorm and embedding bias counts; weights stay frozen."""

from __future__ import annotations

from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from ptmlab.contracts import ConfigError
from ptmlab.methods.adaptation import AdaptationParams


class BitFit(Adaptation):
    declaration = AdaptationParams

    name = "bitfit"

    def prepare(self, model: nn.Module) -> None:
        set_trainable([model.backbone], False)
        biases = [p for name, p in model.backbone.named_parameters() if name.rsplit(".", 1)[-1] == "bias"]
        if not biases:
            raise ConfigError(f"adaptation=bitfit: {type(model.backbone).__name__} has no bias terms to train")
        for p in biases:
            p.requires_grad_(True)
        set_trainable([model.head], True)

"""Layer freezing: the embeddings and the bottom `num_frozen` layers stay fixed, the top layers
and the head train (the "freeze all but the top k" baseline of Howard & Ruder 2018, Sun et
al. 2019). `num_trainable` (top k) may be given instead."""

from __future__ import annotations

from typing import Any

from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from ptmlab.contracts import ConfigError
from ptmlab.methods.adaptation import FreezeLayersParams


class FreezeLayers(Adaptation):
    declaration = FreezeLayersParams

    name = "freeze_layers"

    takes_declaration = True

    def __init__(self, params: FreezeLayersParams | None = None, **values: Any):
        self.params = self.declared_params(params, values)  # exactly one of the two: the declaration's rule
        self.num_frozen, self.num_trainable = self.params.num_frozen, self.params.num_trainable

    def prepare(self, model: nn.Module) -> None:
        layers = model.backbone.layer_modules()
        frozen = self.num_frozen if self.num_frozen is not None else len(layers) - int(self.num_trainable)
        if not 0 <= frozen <= len(layers):
            raise ConfigError(f"adaptation freezes {frozen} layers but the backbone has {len(layers)}")
        set_trainable([model], True)
        set_trainable(model.backbone.embedding_modules(), False)
        set_trainable(layers[:frozen], False)

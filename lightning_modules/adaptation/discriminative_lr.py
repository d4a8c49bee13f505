"""Discriminative (layer-wise decaying) learning rates (Howard & Ruder 2018; Sun et al. 2019):
the head gets the base rate, layer l of L gets lr · decay^(L - l), the embeddings lr · decay^(L+1)."""

from __future__ import annotations

from typing import Any

from torch import nn

from lightning_modules.adaptation.base import Adaptation
from lightning_modules.optim import decay_param_groups
from ptmlab.methods.adaptation import DiscriminativeLRParams


class DiscriminativeLR(Adaptation):
    declaration = DiscriminativeLRParams

    name = "discriminative_lr"

    takes_declaration = True

    def __init__(self, params: DiscriminativeLRParams | None = None, **values: Any):
        self.params = self.declared_params(params, values)
        self.decay = float(self.params.decay)

    def param_groups(self, model: nn.Module, lr: float, weight_decay: float) -> list[dict]:
        layers = model.backbone.layer_modules()
        depth = len(layers)
        assigned: set[int] = set()
        groups: list[dict] = []

        def add(modules, rate: float) -> None:
            named = [(n, p) for m in modules for n, p in m.named_parameters() if id(p) not in assigned]
            assigned.update(id(p) for _, p in named)
            groups.extend(decay_param_groups(named, weight_decay, lr=rate))

        for index, layer in enumerate(layers):
            add([layer], lr * self.decay ** (depth - index))
        add(model.backbone.embedding_modules(), lr * self.decay ** (depth + 1))
        rest = [(n, p) for n, p in model.named_parameters() if id(p) not in assigned]
        groups.extend(decay_param_groups(rest, weight_decay, lr=lr))  # head (and anything else)
        return groups

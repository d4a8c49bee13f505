"""Adapters (Houlsby et al. 2019): a bottleneck (down-project, nonlinearity, up-project, residual)
after the attention output and after the feed-forward output of every layer, inserted before
the sub-layer's residual + LayerNorm. The backbone is frozen except the adapters and the layer
norms; the head trains. Up-projections start at zero so the adapted model starts as the
pre-trained one."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from ptmlab.contracts import ConfigError
from ptmlab.methods.adaptation import AdaptersParams

# (attention output projection, feed-forward output projection) inside one layer, by naming
# scheme: Hugging Face BERT-family (BertSelfOutput.dense, BertOutput.dense) and ptmlab's own.
OUTPUT_PROJECTIONS = (("attention.output.dense", "output.dense"), ("attention.output", "feed_forward.dense_out"))


class BottleneckAdapter(nn.Module):
    def __init__(self, hidden_size: int, bottleneck: int):
        super().__init__()
        self.down = nn.Linear(hidden_size, bottleneck)
        self.up = nn.Linear(bottleneck, hidden_size)
        self.act = nn.GELU()
        nn.init.normal_(self.down.weight, std=1e-3)
        nn.init.zeros_(self.down.bias)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.up(self.act(self.down(x)))


class AdaptedProjection(nn.Module):
    """An output projection followed by its adapter (replaces the projection in place)."""

    def __init__(self, projection: nn.Linear, adapter: BottleneckAdapter):
        super().__init__()
        self.projection, self.adapter = projection, adapter

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.adapter(self.projection(x))


def _linear_at(root: nn.Module, dotted: str) -> nn.Linear | None:
    try:
        module = root.get_submodule(dotted)
    except AttributeError:
        return None
    return module if isinstance(module, nn.Linear) else None


class Adapters(Adaptation):
    declaration = AdaptersParams

    name = "adapters"
    takes_declaration = True

    def __init__(self, params: AdaptersParams | None = None, **values: Any):
        self.params = self.declared_params(params, values)
        self.bottleneck = self.params.bottleneck

    def prepare(self, model: nn.Module) -> None:
        set_trainable([model.backbone], False)
        set_trainable(self.insert_modules(model), True)
        for module in model.backbone.modules():  # layer norms train too (Houlsby et al.)
            if isinstance(module, nn.LayerNorm):
                set_trainable([module], True)
        set_trainable([model.head], True)

    def insert_modules(self, model: nn.Module) -> list[BottleneckAdapter]:
        backbone = model.backbone
        adapters: list[BottleneckAdapter] = []
        for layer in backbone.layer_modules():
            paths = next((pair for pair in OUTPUT_PROJECTIONS if all(_linear_at(layer, p) for p in pair)), None)
            if paths is None:
                raise ConfigError(
                    f"adaptation=adapters cannot find the attention/feed-forward output "
                    f"projections in {type(layer).__name__}"
                )
            for path in paths:
                linear = _linear_at(layer, path)
                adapter = BottleneckAdapter(linear.out_features, self.bottleneck)
                adapters.append(adapter)
                layer.set_submodule(path, AdaptedProjection(linear, adapter))
        return adapters

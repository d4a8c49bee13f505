"""Adapters (Houlsby et al. 2019): a bottleneck (down-project, nonlinearity, up-project, residual)
after the attention output and after the feed-forward output of every layer, inserted before
the sub-layer's residual + LayerNorm. The backbone is frozen except the adapters and the layer
norms; the head trains. Up-projections start at zero so the adapted model starts as the
pre-trained one."""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from ptmlab.errors import ConfigError

# (attention output projection, feed-forward output projection) inside one layer, by naming
# scheme: Hugging Face BERT-family (BertSelfOutput.dense, BertOutput.dense) and ptmlab's own.
OUTPUT_PROJECTIONS = (
    ("attention.output.dense", "output.dense"),
    ("attention.output", "feed_forward.dense_out"),
)


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


def _replace(root: nn.Module, dotted: str, make) -> bool:
    parent_path, _, leaf = dotted.rpartition(".")
    parent = root.get_submodule(parent_path) if parent_path else root
    current = getattr(parent, leaf, None)
    if not isinstance(current, nn.Linear):
        return False
    setattr(parent, leaf, make(current))
    return True


class Adapters(Adaptation):
    name = "adapters"

    def __init__(self, bottleneck: int = 64):
        self.bottleneck = int(bottleneck)

    def prepare(self, model: nn.Module) -> None:
        backbone = model.backbone
        set_trainable([backbone], False)
        adapters: list[nn.Module] = []
        for layer in backbone.layer_modules():
            for attention_out, ffn_out in OUTPUT_PROJECTIONS:
                hits = []
                for path in (attention_out, ffn_out):
                    def make(linear, _adapters=adapters):
                        adapter = BottleneckAdapter(linear.out_features, self.bottleneck)
                        _adapters.append(adapter)
                        return AdaptedProjection(linear, adapter)
                    hits.append(_replace(layer, path, make))
                if all(hits):
                    break
            else:
                raise ConfigError(f"adaptation=adapters cannot find the attention/feed-forward output "
                                  f"projections in {type(layer).__name__}")
        set_trainable(adapters, True)
        for module in backbone.modules():  # layer norms train too (Houlsby et al.)
            if isinstance(module, nn.LayerNorm):
                set_trainable([module], True)
        set_trainable([model.head], True)

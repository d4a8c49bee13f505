"""The downstream model of several tasks: one shared backbone and pooling, one head per task
(MT-DNN, Liu et al. 2019)."""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.heads.pooling import PooledEncoder, linear_head
from ptmlab.contracts import ConfigError


class MultiTaskModel(PooledEncoder):
    """A shared backbone and its pooling (heads/pooling.py), one dropout+linear head per task."""

    def __init__(
        self,
        backbone: nn.Module,
        num_labels: dict[str, int],
        pooling: str = "pool_index",
        head_dropout: float = 0.1,
        scalar_mix: bool = False,
    ):
        super().__init__(backbone, pooling=pooling, scalar_mix=scalar_mix)
        self.heads = nn.ModuleDict(
            {name: linear_head(backbone.hidden_size, n, head_dropout) for name, n in num_labels.items()}
        )

    def forward(self, task: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.heads[task](self.pooled(batch))  # B×C (C=1 for regression)

    @property
    def head_sizes(self) -> dict[str, int]:
        return {name: head[-1].out_features for name, head in self.heads.items()}

    def task_logits(self, task: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if task not in self.heads:
            raise ConfigError(f"this model has no head for task {task} (heads: {', '.join(self.heads)})")
        return self(task, batch)

    def logits(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        pooled = self.pooled(batch)
        return {name: head(pooled) for name, head in self.heads.items()}

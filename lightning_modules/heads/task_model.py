"""The downstream model of one task: backbone → pooled representation → one task head."""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.heads.pooling import PooledEncoder, linear_head
from ptmlab.contracts import ConfigError


class TaskModel(PooledEncoder):
    """Backbone → pooled representation (heads/pooling.py) → one dropout+linear `head`; with
    pooling=tokens the same head reads every position (token classification, as Hugging Face's
    `*ForTokenClassification`: dropout + linear on the last hidden states); with pooling=spans it
    is the start/end head of extractive QA (C=2, as `*ForQuestionAnswering`'s `qa_outputs`).
    `task_name` names the head in `logits()` (None: whichever task is asked for)."""

    def __init__(self, backbone: nn.Module, num_labels: int, pooling: str = "pool_index",
                 head_dropout: float = 0.1, scalar_mix: bool = False, task_name: str | None = None):
        super().__init__(backbone, pooling=pooling, scalar_mix=scalar_mix)
        self.task_name = task_name
        self.head = linear_head(backbone.hidden_size, num_labels, head_dropout)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head(self.pooled(batch))  # B×C (C=1 for regression); B×T×C with pooling=tokens

    @property
    def head_sizes(self) -> dict[str, int]:
        return {self.task_name or "task": self.head[-1].out_features}

    def task_logits(self, task: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.task_name is not None and task != self.task_name:
            raise ConfigError(f"this model's head is for task {self.task_name}, not {task}")
        return self(batch)

    def logits(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {self.task_name or "task": self(batch)}

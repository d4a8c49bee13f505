"""The downstream model of one task: backbone → pooled representation → one task head."""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.heads.pooling import SingleHeadModel, linear_head


class TaskModel(SingleHeadModel):
    """Backbone → pooled representation (heads/pooling.py) → one dropout+linear `head`; with
    pooling=tokens the same head reads every position (token classification, as Hugging Face's
    `*ForTokenClassification`: dropout + linear on the last hidden states); with pooling=spans it
    is the start/end head of extractive QA (C=2, as `*ForQuestionAnswering`'s `qa_outputs`).
    `task_name` names the head in `logits()` (None: whichever task is asked for)."""

    def __init__(
        self,
        backbone: nn.Module,
        num_labels: int,
        pooling: str = "pool_index",
        head_dropout: float = 0.1,
        scalar_mix: bool = False,
        task_name: str | None = None,
    ):
        super().__init__(backbone, pooling=pooling, scalar_mix=scalar_mix)
        self.task_name = task_name
        self.head = linear_head(backbone.hidden_size, num_labels, head_dropout)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head(self.pooled(batch))  # B×C (C=1 for regression); B×T×C with pooling=tokens

    @property
    def head_sizes(self) -> dict[str, int]:
        return {self.task_name or "task": self.head[-1].out_features}

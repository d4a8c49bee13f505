"""Longformer attention (Beltagy et al. 2020): the sliding window plus global tokens (e.g. [CLS]
at 0) that attend to every position and that every position attends to. Global positions beyond
the sequence are dropped for that batch (a short batch of a model configured for long ones)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from lightning_modules.models.attention.sliding_window import SlidingWindowAttention


@functools.lru_cache(maxsize=256)
def global_positions(global_tokens: tuple[int, ...], length: int, device: torch.device) -> torch.Tensor | None:
    """The sorted distinct global positions below `length` (G), or None when there are none; kept per
    length and device, so a step makes no host-to-device copy (callers never write into it)."""
    kept = sorted({int(i) for i in global_tokens if 0 <= int(i) < length})
    return torch.tensor(kept, dtype=torch.long, device=device) if kept else None


class LongformerAttention(SlidingWindowAttention):
    def __init__(self, window: int, global_tokens: Sequence[int] = (0,)):
        super().__init__(window)
        self.global_tokens = tuple(int(i) for i in global_tokens)

    def global_positions(self, length: int, device: torch.device) -> torch.Tensor | None:
        return global_positions(self.global_tokens, length, device)

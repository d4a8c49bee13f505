"""Sliding-window attention (Beltagy et al. 2020, the local part of Longformer): position i attends
to the positions j with |i - j| <= window (causal: i - window <= j <= i, the past only).

`window` is one-sided, so a query sees 2·window + 1 keys (window + 1 when causal). Computed in blocks
of `window` positions, each attending to its own block and its neighbours (`blocked.py`)."""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.models.attention.blocked import blocked_attention


def neighbour_blocks(num_blocks: int, is_causal: bool, device: torch.device) -> torch.Tensor:
    """1×n×m block ids: each block, the one before it and (bidirectional) the one after; -1 off the ends."""
    own = torch.arange(num_blocks, device=device)
    steps = (-1, 0) if is_causal else (-1, 0, 1)
    table = torch.stack([own + s for s in steps], dim=-1)  # n×m
    table = table.masked_fill((table < 0) | (table >= num_blocks), -1)
    return table[None]


class SlidingWindowAttention(nn.Module):
    def __init__(self, window: int):
        super().__init__()
        if window <= 0:
            raise ValueError(f"window={window}: expected a positive integer")
        self.window = int(window)

    def global_positions(self, length: int, device: torch.device) -> torch.Tensor | None:
        return None

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        key_mask: torch.Tensor | None,
        is_causal: bool,
        dropout_p: float,
    ) -> torch.Tensor:
        t = q.shape[2]
        block = min(self.window, t)  # a block as wide as the window: its neighbours cover |i - j| <= window
        table = neighbour_blocks(-(-t // block), is_causal, q.device)
        return blocked_attention(
            q,
            k,
            v,
            key_mask,
            table,
            block,
            window=self.window,
            is_causal=is_causal,
            global_tokens=self.global_positions(t, q.device),
            dropout_p=dropout_p,
        )

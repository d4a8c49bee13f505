"""Linformer (Wang et al. 2020): keys and values projected over the sequence axis to a fixed
length k by learned matrices E and F (k × max positions, one pair per layer, shared by the heads),
so attention costs T·k instead of T². E and F are sliced to the sequence's length; padding keys and
values are zeroed before the projection, so they add nothing. Bidirectional only: the projection
mixes every position, the future included."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.models.attention.blocked import padded_key_mask


class LinformerAttention(nn.Module):
    def __init__(self, max_length: int, projected_length: int):
        super().__init__()
        if not 0 < projected_length <= max_length:
            raise ValueError(f"projected_length={projected_length}: expected an integer in [1, {max_length}]")
        bound = 1.0 / math.sqrt(projected_length)
        self.key_projection = nn.Parameter(torch.empty(projected_length, max_length).uniform_(-bound, bound))  # E
        self.value_projection = nn.Parameter(torch.empty(projected_length, max_length).uniform_(-bound, bound))  # F

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        key_mask: torch.Tensor | None,
        is_causal: bool,
        dropout_p: float,
    ) -> torch.Tensor:
        if is_causal:
            raise ValueError("Linformer attention is bidirectional: its projection mixes future positions")
        b, _, t, _ = k.shape
        if key_mask is not None:
            real = padded_key_mask(key_mask, b, t, k.device)[:, None, :, None].to(k.dtype)  # B×1×T×1
            k, v = k * real, v * real
        keys = self.key_projection[:, :t] @ k  # k×T @ B×heads×T×d -> B×heads×k×d
        values = self.value_projection[:, :t] @ v  # B×heads×k×d
        return F.scaled_dot_product_attention(q, keys, values, dropout_p=dropout_p)

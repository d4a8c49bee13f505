"""BigBird's block-sparse attention (Zaheer et al. 2020, ITC): the sequence in blocks of
`block_size`; each query block attends to its own block, the blocks on either side, and
`num_random_blocks` other blocks drawn per head, and global tokens attend to and are attended by
all. The random blocks are drawn with a fixed seed per number of blocks, so a model attends the same
way in every run and after a reload (the pattern is no weight, so it is not saved)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from lightning_modules.models.attention.blocked import blocked_attention
from lightning_modules.models.attention.longformer import global_positions
from lightning_modules.models.attention.sliding_window import neighbour_blocks

RANDOM_BLOCKS_SEED = 0


def bigbird_block_table(num_blocks: int, num_heads: int, num_random_blocks: int, seed: int) -> torch.Tensor:
    """heads×n×(3 + r) block ids: the window (previous, own, next) then r random blocks outside it,
    distinct, drawn per head from a generator seeded with `seed`; -1 where there are fewer blocks."""
    window = neighbour_blocks(num_blocks, False, torch.device("cpu"))[0]  # n×3
    r = min(num_random_blocks, max(num_blocks - 3, 0))
    table = window[None].expand(num_heads, -1, -1)  # heads×n×3
    if r > 0:
        generator = torch.Generator().manual_seed(seed)
        draws = torch.rand(num_heads, num_blocks, num_blocks, generator=generator)  # heads×n×n
        in_window = torch.zeros(num_blocks, num_blocks, dtype=torch.bool)
        in_window.scatter_(1, window.clamp(min=0), True)  # n×n: (query block, key block) in the window
        draws = draws.masked_fill(in_window, -1.0)
        table = torch.cat([table, draws.topk(r, dim=-1).indices], dim=-1)
    missing = num_random_blocks - r
    if missing > 0:
        table = torch.cat([table, torch.full((num_heads, num_blocks, missing), -1)], dim=-1)
    return table


class BigBirdAttention(nn.Module):
    def __init__(self, block_size: int, num_random_blocks: int, num_heads: int, global_tokens: Sequence[int] = (0,)):
        super().__init__()
        self.block_size = int(block_size)
        self.num_random_blocks = int(num_random_blocks)
        self.num_heads = int(num_heads)
        self.global_tokens = tuple(int(i) for i in global_tokens)
        # (number of blocks, device) -> its table, drawn once: no host-to-device copy per step.
        self._tables: dict[tuple[int, torch.device], torch.Tensor] = {}

    def block_table(self, length: int, device: torch.device) -> torch.Tensor:
        num_blocks = -(-length // self.block_size)
        key = (num_blocks, device)
        if key not in self._tables:
            table = bigbird_block_table(num_blocks, self.num_heads, self.num_random_blocks, RANDOM_BLOCKS_SEED)
            self._tables[key] = table.to(device)
        return self._tables[key]

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
        return blocked_attention(
            q,
            k,
            v,
            key_mask,
            self.block_table(t, q.device),
            self.block_size,
            is_causal=is_causal,
            global_tokens=global_positions(self.global_tokens, t, q.device),
            dropout_p=dropout_p,
        )

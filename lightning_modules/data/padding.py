"""Token rows of different lengths as one right-padded batch: the one padding every collate uses
(pre-training, sentence(-pair) tasks, token classification)."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def pad_right(rows: Sequence[Sequence], fill, *, length: int, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """B×length: row i's values first, `fill` after them."""
    out = torch.full((len(rows), length), fill, dtype=dtype)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.as_tensor(row, dtype=dtype)
    return out


def padded_tokens(items: Sequence[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """input_ids (padded with `pad_id`), attention_mask (1 on tokens) and token_type_ids (0 past a
    row's end, and on a row that has none), B×T with T the longest row."""
    length = max(len(x["input_ids"]) for x in items)
    return {
        "input_ids": pad_right([x["input_ids"] for x in items], pad_id, length=length),
        "attention_mask": pad_right([[1] * len(x["input_ids"]) for x in items], 0, length=length),
        "token_type_ids": pad_right([x.get("token_type_ids", ()) for x in items], 0, length=length),
    }

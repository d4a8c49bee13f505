"""Blocked local + global attention: the computation sliding-window, Longformer and BigBird share.

The (padded) sequence is cut into n blocks of c positions. Each query block attends to m key blocks
that a block table names (its neighbours; for BigBird random blocks too), gathered into one key set
of m·c positions, so the scores are B×heads×n×c×(m·c): time and memory grow linearly with T for a
fixed c and m, where full attention's B×heads×T×T grows with T². A sliding window also limits each
query to |i - j| <= window inside those blocks. Global tokens add G key columns every query sees and
G query rows that see every key; they are left out of the gathered blocks so no key counts twice.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def padded_key_mask(key_mask: torch.Tensor | None, batch: int, length: int, device: torch.device) -> torch.Tensor:
    """B×T boolean (True = a real token) from the B×1×1×T key mask MultiHeadAttention receives."""
    if key_mask is None:
        return torch.ones(batch, length, dtype=torch.bool, device=device)
    if key_mask.dtype != torch.bool or key_mask.shape[-1] != length or key_mask.numel() != batch * length:
        raise ValueError(
            f"a sparse attention pattern takes a boolean B×1×1×T key mask, got {key_mask.dtype} {tuple(key_mask.shape)}"
        )
    return key_mask.reshape(batch, length)


def blocked_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_mask: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    window: int | None = None,
    is_causal: bool = False,
    global_tokens: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Context B×heads×T×d of q, k, v (B×heads×T×d).

    block_table: H'×n×m block ids (H' = 1 or heads; -1 = no block), n = ceil(T / block_size).
    window: also require |i - j| <= window. global_tokens: G sorted distinct positions < T.
    A query whose every key is masked (a padding query among padding) gets a uniform row, not NaN.
    """
    b, h, t, d = q.shape
    c = block_size
    n = block_table.shape[1]
    pad = n * c - t
    if pad < 0:
        raise ValueError(f"a block table of {n} blocks of {c} does not cover {t} positions")
    real = padded_key_mask(key_mask, b, t, q.device)
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))  # B×heads×n·c×d
        real = F.pad(real, (0, pad), value=False)  # B×n·c
    scale = 1.0 / math.sqrt(d)
    has_globals = global_tokens is not None and global_tokens.numel() > 0
    local_keys = real
    if has_globals:
        assert global_tokens is not None
        local_keys = real.clone()
        local_keys[:, global_tokens] = False  # globals come as their own columns below

    exists = block_table >= 0
    ids = block_table.clamp(min=0)
    offsets = torch.arange(c, device=q.device)
    key_pos = (ids[..., None] * c + offsets).flatten(-2)  # H'×n×m×c -> H'×n×m·c
    query_pos = torch.arange(n * c, device=q.device).view(n, c)  # n×c
    allowed = exists[..., None].expand(*exists.shape, c).flatten(-2)[:, :, None, :]  # H'×n×1×m·c
    relative = query_pos[None, :, :, None] - key_pos[:, :, None, :]  # H'×n×c×m·c: i - j
    if window is not None:
        allowed = allowed & (relative.abs() <= window)
    if is_causal:
        allowed = allowed & (relative >= 0)
    allowed = allowed[None] & local_keys[:, key_pos][:, :, :, None, :]  # B×H'×n×c×m·c

    blocks_k = k.view(b, h, n, c, d)
    blocks_v = v.view(b, h, n, c, d)
    if block_table.shape[0] == 1:
        keys, values = blocks_k[:, :, ids[0]], blocks_v[:, :, ids[0]]  # B×heads×n×m×c×d
    else:
        heads = torch.arange(h, device=q.device)[:, None, None]
        keys, values = blocks_k[:, heads, ids], blocks_v[:, heads, ids]  # B×heads×n×m×c×d
    keys = keys.reshape(b, h, n, -1, d)  # B×heads×n×m·c×d
    values = values.reshape(b, h, n, -1, d)
    queries = q.view(b, h, n, c, d)  # B×heads×n·c×d -> B×heads×n×c×d
    scores = queries @ keys.transpose(-1, -2) * scale  # B×heads×n×c×m·c
    local_width = scores.shape[-1]

    if has_globals:
        assert global_tokens is not None
        global_k, global_v = k[:, :, global_tokens], v[:, :, global_tokens]  # B×heads×G×d
        global_scores = queries @ global_k.transpose(-1, -2)[:, :, None] * scale  # B×heads×n×c×G
        global_allowed = real[:, global_tokens][:, None, None, None, :]  # B×1×1×1×G
        if is_causal:
            global_allowed = global_allowed & (global_tokens <= query_pos[..., None])  # B×1×n×c×G
        scores = torch.cat([scores, global_scores], dim=-1)
        shape = (b, allowed.shape[1], n, c)
        allowed = torch.cat([allowed.expand(*shape, -1), global_allowed.expand(*shape, -1)], dim=-1)

    probs = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min).softmax(dim=-1)
    probs = F.dropout(probs, dropout_p, training=dropout_p > 0)
    context = probs[..., :local_width] @ values  # B×heads×n×c×d
    if has_globals:
        context = context + probs[..., local_width:] @ global_v[:, :, None]
    context = context.reshape(b, h, n * c, d)[:, :, :t]  # B×heads×n×c×d -> B×heads×T×d

    if has_globals:
        assert global_tokens is not None
        # Global queries see every key: G full rows, linear in T.
        rows = q[:, :, global_tokens] @ k[:, :, :t].transpose(-1, -2) * scale  # B×heads×G×T
        row_allowed = real[:, None, None, :t]  # B×1×1×T
        if is_causal:
            row_allowed = row_allowed & (torch.arange(t, device=q.device) <= global_tokens[:, None])
        rows = rows.masked_fill(~row_allowed, torch.finfo(rows.dtype).min).softmax(dim=-1)
        rows = F.dropout(rows, dropout_p, training=dropout_p > 0)
        context = context.index_copy(2, global_tokens, rows @ v[:, :, :t])  # B×heads×G×d into its rows
    return context

"""Position selectors for masked-LM variants: whole-word masking and SpanBERT span masking.

Both return the same B×T boolean "predict here" mask as `masking.select_tokens`, so they plug
into `masking.replace_selected` (80% [MASK] / 10% random / 10% unchanged) unchanged.
Word boundaries come from the vocabulary (`word_start_table`): WordPiece marks continuations
with "##", byte-level BPE marks word starts with "Ġ", Unigram/SentencePiece with "▁".
"""

from __future__ import annotations

import math

import torch

from lightning_modules.objectives.masking import _uniform


def word_start_table(tokenizer) -> torch.Tensor:
    """V bool: True where a token id begins a word (special tokens count as word starts)."""
    vocab = tokenizer.get_vocab()
    size = max(len(tokenizer), max(vocab.values()) + 1)
    table = torch.ones(size, dtype=torch.bool)
    pieces = list(vocab)
    if any(p.startswith("##") for p in pieces):  # WordPiece: "##" marks a continuation
        for piece, idx in vocab.items():
            table[idx] = not piece.startswith("##")
        return table
    marker = (
        "Ġ" if any(p.startswith("Ġ") for p in pieces) else ("▁" if any(p.startswith("▁") for p in pieces) else None)
    )
    if marker is None:
        return table  # no sub-word marks: every token is a word
    special = set(tokenizer.all_special_tokens)
    for piece, idx in vocab.items():
        table[idx] = piece.startswith(marker) or piece in special
    return table


def word_start_positions(word_start: torch.Tensor, special_tokens_mask: torch.Tensor) -> torch.Tensor:
    """B×T bool: positions that begin a word. A maskable token right after a special token (or at
    position 0) begins a word even if the vocabulary calls it a continuation, so no word spans a
    [SEP] or padding."""
    valid = ~special_tokens_mask.bool()
    prev_valid = torch.zeros_like(valid)
    prev_valid[:, 1:] = valid[:, :-1]
    return valid & (word_start.bool() | ~prev_valid)


def word_index(starts: torch.Tensor) -> torch.Tensor:
    """B×T long: for each position, the position of the first token of its word."""
    positions = torch.arange(starts.shape[1], device=starts.device).expand_as(starts)
    return torch.where(starts, positions, torch.zeros_like(positions)).cummax(dim=1).values


def whole_word_select(
    word_start: torch.Tensor, special_tokens_mask: torch.Tensor, mask_prob: float, generator: torch.Generator
) -> torch.Tensor:
    """Whole-word masking (Devlin et al., 2019 release; Cui et al. 2019): each word is selected
    with probability `mask_prob` and all its sub-word tokens with it, so the expected share of
    selected tokens is `mask_prob` and a word is never half-masked.
    word_start: B×T bool (a token begins a word); special_tokens_mask: B×T bool (never selected)."""
    if not 0.0 <= mask_prob <= 1.0:
        raise ValueError(f"mask_prob={mask_prob} must be in [0, 1]")
    starts = word_start_positions(word_start, special_tokens_mask)
    draws = _uniform(special_tokens_mask.shape, generator, special_tokens_mask.device)
    chosen_word = draws.gather(1, word_index(starts)) < mask_prob  # each token reads its word's draw
    return chosen_word & ~special_tokens_mask.bool()


def truncated_geometric_lengths(n: int, p: float, max_length: int, generator: torch.Generator) -> torch.Tensor:
    """n span lengths from Geometric(p) on {1, ..., max_length}, renormalised to that range:
    what SpanBERT calls "clipped at ℓ_max" (its code draws from the renormalised distribution,
    which gives the paper's mean of 3.8 for p=0.2, max 10; clamping would give 4.46)."""
    if not 0.0 < p <= 1.0 or max_length < 1:
        raise ValueError(f"geometric p={p} must be in (0, 1] and max_length={max_length} >= 1")
    if p == 1.0:
        return torch.ones(n, dtype=torch.long)
    q = 1.0 - p
    u = torch.rand(n, generator=generator, device=generator.device).cpu().double()
    # Inverse CDF of the truncated distribution: F(k) = (1 - q^k) / (1 - q^max).
    lengths = torch.floor(torch.log1p(-u * (1.0 - q**max_length)) / math.log(q)).long() + 1
    return lengths.clamp(1, max_length)


def truncated_geometric_mean(p: float, max_length: int) -> float:
    q = 1.0 - p
    return sum(k * p * q ** (k - 1) for k in range(1, max_length + 1)) / (1.0 - q**max_length)


def span_select(
    special_tokens_mask: torch.Tensor,
    mask_prob: float,
    generator: torch.Generator,
    geometric_p: float = 0.2,
    max_span_length: int = 10,
    word_start: torch.Tensor | None = None,
) -> torch.Tensor:
    """SpanBERT span masking (Joshi et al. 2020): repeatedly sample a span length (in words when
    `word_start` is given, else tokens) from a truncated geometric distribution and a random
    starting word, and select the contiguous span, until `mask_prob` of each row's maskable
    tokens are selected (the last span is cut to the budget). Spans never cross a special token.
    Returns B×T bool."""
    if not 0.0 <= mask_prob <= 1.0:
        raise ValueError(f"mask_prob={mask_prob} must be in [0, 1]")
    special = special_tokens_mask.bool()
    if word_start is None:
        word_start = torch.ones_like(special)
    starts = word_start_positions(word_start.to(special.device), special)
    selected = torch.zeros_like(special)
    valid_rows = (~special).sum(dim=1).tolist()
    for row, n_valid in enumerate(valid_rows):
        budget = int(round(mask_prob * n_valid))
        if budget == 0:
            continue
        word_begin = starts[row].nonzero().flatten().tolist()
        # A word runs to the next word start or to the next special token.
        valid_row = (~special[row]).tolist()
        word_end = []
        for i, b in enumerate(word_begin):
            e = b + 1
            limit = word_begin[i + 1] if i + 1 < len(word_begin) else len(valid_row)
            while e < limit and valid_row[e]:
                e += 1
            word_end.append(e)
        n_words = len(word_begin)
        row_selected = [False] * len(valid_row)
        count, tries = 0, 0
        draws_needed = 4 * budget + 8
        lengths = truncated_geometric_lengths(draws_needed, geometric_p, max_span_length, generator).tolist()
        anchors = torch.randint(n_words, (draws_needed,), generator=generator, device=generator.device).tolist()
        while count < budget and tries < draws_needed:
            length, w = lengths[tries], anchors[tries]
            tries += 1
            if row_selected[word_begin[w]]:
                continue  # starts inside an earlier span: draw again
            last = w
            # Extend over following words while they are contiguous (no special token between).
            while last + 1 < n_words and last + 1 - w < length and word_begin[last + 1] == word_end[last]:
                last += 1
            for pos in range(word_begin[w], word_end[last]):
                if count >= budget:
                    break
                if not row_selected[pos]:
                    row_selected[pos] = True
                    count += 1
        selected[row] = torch.tensor(row_selected, dtype=torch.bool, device=special.device)
    return selected


def span_boundaries(selected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For every position of a B×T selection, the boundary tokens of its contiguous selected run
    (SpanBERT's span-boundary objective reads x_{s-1} and x_{e+1}): (left B×T, right B×T,
    offset B×T) with left = last unselected position before, right = first unselected position
    after (clamped into the row), offset = position - left - 1 (0 for the first token of a run).
    Values at unselected positions are meaningless."""
    b, t = selected.shape
    positions = torch.arange(t, device=selected.device).expand(b, t)
    unselected = ~selected.bool()
    left = torch.where(unselected, positions, torch.full_like(positions, -1)).cummax(dim=1).values
    flipped = torch.where(unselected, positions, torch.full_like(positions, t)).flip(1)
    right = flipped.cummin(dim=1).values.flip(1)
    offset = positions - left - 1
    return left.clamp(0, t - 1), right.clamp(0, t - 1), offset

"""BART's noising functions (Lewis et al. 2020, §2.2), each on one 1-D sequence of token ids
(the body of an example, without its framing tokens), returning a new 1-D sequence:

    token_masking         each token becomes <mask> with probability `rate`
    token_deletion        each token is dropped with probability `rate`
    text_infilling        spans with Poisson(λ=3) lengths cover `rate` of the tokens; each span
                          becomes ONE <mask>; a 0-length span inserts a <mask>
    sentence_permutation  sentences (split after full-stop tokens) are shuffled
    document_rotation     the sequence is rotated to start at a uniformly drawn token

`apply_noise` composes the selected ones in BART's order. The decoder reconstructs the original.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

NOISE_ORDER = ("sentence_permutation", "token_masking", "token_deletion", "text_infilling", "document_rotation")


def _rand(n: int, generator: torch.Generator) -> torch.Tensor:
    return torch.rand(n, generator=generator, device=generator.device).cpu()


def token_masking(ids: torch.Tensor, rate: float, mask_id: int, generator: torch.Generator) -> torch.Tensor:
    hit = _rand(ids.numel(), generator) < rate
    return ids.masked_fill(hit.to(ids.device), mask_id)


def token_deletion(ids: torch.Tensor, rate: float, generator: torch.Generator) -> torch.Tensor:
    keep = _rand(ids.numel(), generator) >= rate
    return ids[keep.to(ids.device)]


def poisson_lengths(n: int, lam: float, generator: torch.Generator) -> torch.Tensor:
    rates = torch.full((n,), float(lam))
    return torch.poisson(rates, generator=generator if generator.device.type == "cpu" else None).long()


def infilling_spans(
    length: int, rate: float, generator: torch.Generator, poisson_lambda: float = 3.0
) -> list[tuple[int, int]]:
    """(start, span_length) pairs, sorted, non-overlapping, covering ceil(rate·length) tokens in
    total (the last span is cut to the budget); zero-length spans are kept (insertions)."""
    budget = math.ceil(rate * length)
    if budget == 0 or length == 0:
        return []
    spans: list[tuple[int, int]] = []
    covered = [False] * length
    insertions: set[int] = set()
    total = 0
    tries = 0
    while total < budget and tries < 20 * (budget + 1):
        draws = poisson_lengths(budget + 4, poisson_lambda, generator).tolist()
        starts = torch.randint(length, (budget + 4,), generator=generator, device=generator.device).tolist()
        for span_length, start in zip(draws, starts):
            tries += 1
            if total >= budget:
                break
            span_length = min(span_length, budget - total, length - start)
            if any(covered[start : start + span_length]) or (span_length == 0 and covered[start]):
                continue  # overlaps an earlier span: draw again
            if span_length == 0 and start in insertions:
                continue
            if any(start < p < start + span_length for p in insertions):
                continue  # would swallow an earlier insertion point
            if span_length == 0:
                insertions.add(start)
            for p in range(start, start + span_length):
                covered[p] = True
            spans.append((start, span_length))
            total += span_length
    return sorted(spans)


def text_infilling(
    ids: torch.Tensor, rate: float, mask_id: int, generator: torch.Generator, poisson_lambda: float = 3.0
) -> torch.Tensor:
    spans = infilling_spans(ids.numel(), rate, generator, poisson_lambda)
    values = ids.tolist()
    out: list[int] = []
    cursor = 0
    for start, span_length in spans:
        out.extend(values[cursor:start])
        out.append(mask_id)  # one <mask> for the whole span (or an inserted one)
        cursor = max(cursor, start + span_length)
    out.extend(values[cursor:])
    return torch.tensor(out, dtype=ids.dtype, device=ids.device)


def sentence_permutation(ids: torch.Tensor, full_stop_ids: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    """Split after every full-stop token (the trailing fragment is a sentence too) and shuffle."""
    values = ids.tolist()
    stops = set(int(i) for i in full_stop_ids)
    sentences, current = [], []
    for v in values:
        current.append(v)
        if v in stops:
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    order = torch.randperm(len(sentences), generator=generator, device=generator.device).tolist()
    return torch.tensor([v for i in order for v in sentences[i]], dtype=ids.dtype, device=ids.device)


def document_rotation(ids: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    if ids.numel() == 0:
        return ids
    start = int(torch.randint(ids.numel(), (1,), generator=generator, device=generator.device))
    return torch.cat([ids[start:], ids[:start]])


@dataclass(frozen=True)
class NoiseConfig:
    """Rates of each noising function; 0 (or False) turns one off."""

    token_masking: float = 0.0
    token_deletion: float = 0.0
    text_infilling: float = 0.0
    poisson_lambda: float = 3.0
    sentence_permutation: bool = False
    document_rotation: bool = False

    def __post_init__(self):
        for key in ("token_masking", "token_deletion", "text_infilling"):
            value = getattr(self, key)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{key}={value} must be in [0, 1]")
        if self.poisson_lambda < 0:
            raise ValueError(f"poisson_lambda={self.poisson_lambda} must be >= 0")

    def active(self) -> list[str]:
        return [name for name in NOISE_ORDER if getattr(self, name)]


def apply_noise(
    ids: torch.Tensor, noise: NoiseConfig, mask_id: int, full_stop_ids: Sequence[int], generator: torch.Generator
) -> torch.Tensor:
    """The composition BART uses, in its order: permute sentences, mask/delete/infill, rotate."""
    out = ids
    if noise.sentence_permutation:
        out = sentence_permutation(out, full_stop_ids, generator)
    if noise.token_masking:
        out = token_masking(out, noise.token_masking, mask_id, generator)
    if noise.token_deletion:
        out = token_deletion(out, noise.token_deletion, generator)
    if noise.text_infilling:
        out = text_infilling(out, noise.text_infilling, mask_id, generator, noise.poisson_lambda)
    if noise.document_rotation:
        out = document_rotation(out, generator)
    return out

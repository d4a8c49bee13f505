"""Span corruption for encoder–decoders that predict only the corrupted part.

T5 (Raffel et al. 2020, §3.1.4): `random_spans_noise_mask` marks round(density·n) noise tokens
in round(noise/mean_span) spans (the same procedure as T5's own `random_spans_noise_mask`);
`sentinel_corrupt` replaces each noise span in the input by one sentinel <extra_id_i> and builds
the target "<extra_id_0> span0 <extra_id_1> span1 ... <extra_id_k>".

MASS (Song et al. 2019): `mass_span` masks one contiguous fragment of round(ratio·n) tokens in
the encoder input (every token becomes <mask>); the decoder predicts the fragment.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def random_segmentation(num_items: int, num_segments: int, generator: torch.Generator) -> list[int]:
    """Split num_items into num_segments positive lengths, uniformly over all such splits."""
    if num_segments <= 0 or num_items < num_segments:
        raise ValueError(f"cannot split {num_items} items into {num_segments} non-empty segments")
    cut_candidates = torch.randperm(num_items - 1, generator=generator, device=generator.device)[: num_segments - 1]
    cuts = sorted((cut_candidates + 1).tolist())
    bounds = [0, *cuts, num_items]
    return [b - a for a, b in zip(bounds[:-1], bounds[1:])]


def random_spans_noise_mask(
    length: int,
    generator: torch.Generator,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    max_spans: int | None = None,
) -> torch.Tensor:
    """1-D bool of `length`: True at noise tokens. Noise and non-noise runs alternate, starting
    with non-noise, so no two noise spans touch. `max_spans` caps the span count (a tokenizer
    has a fixed number of sentinels); the noise count is kept, spans get longer instead."""
    if length < 2:
        return torch.zeros(length, dtype=torch.bool)
    num_noise = min(max(int(round(length * noise_density)), 1), length - 1)
    num_spans = max(int(round(num_noise / mean_noise_span_length)), 1)
    if max_spans is not None:
        num_spans = min(num_spans, max_spans)
    num_spans = min(num_spans, num_noise, length - num_noise)
    noise_lengths = random_segmentation(num_noise, num_spans, generator)
    keep_lengths = random_segmentation(length - num_noise, num_spans, generator)
    mask: list[bool] = []
    for keep, noise in zip(keep_lengths, noise_lengths):
        mask.extend([False] * keep)
        mask.extend([True] * noise)
    return torch.tensor(mask, dtype=torch.bool)


def sentinel_corrupt(
    ids: torch.Tensor, noise_mask: torch.Tensor, sentinel_ids: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(input, target) for T5: each noise span of `ids` becomes the next sentinel in the input;
    the target lists each sentinel followed by the tokens it replaced, then one final sentinel."""
    values, noise = ids.tolist(), noise_mask.tolist()
    source, target = [], []
    k = 0
    for i, (v, is_noise) in enumerate(zip(values, noise)):
        if is_noise:
            if i == 0 or not noise[i - 1]:
                if k >= len(sentinel_ids) - 1:
                    raise ValueError(f"more noise spans than the {len(sentinel_ids)} sentinel tokens allow")
                source.append(int(sentinel_ids[k]))
                target.append(int(sentinel_ids[k]))
                k += 1
            target.append(v)
        else:
            source.append(v)
    target.append(int(sentinel_ids[k]))
    return (
        torch.tensor(source, dtype=ids.dtype, device=ids.device),
        torch.tensor(target, dtype=ids.dtype, device=ids.device),
    )


def mass_span(
    ids: torch.Tensor, mask_id: int, generator: torch.Generator, ratio: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(encoder input, fragment, start): the fragment ids[start:start+m], m = max(1, round(ratio·n)),
    replaced by <mask> tokens in the encoder input (length unchanged)."""
    n = ids.numel()
    if n == 0:
        return ids.clone(), ids.clone(), 0
    m = min(max(1, int(round(ratio * n))), n)
    start = int(torch.randint(n - m + 1, (1,), generator=generator, device=generator.device))
    source = ids.clone()
    source[start : start + m] = mask_id
    return source, ids[start : start + m].clone(), start

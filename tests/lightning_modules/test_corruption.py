"""Statistics of the corruption functions (whole-word and span masking, BART noising, T5 span
corruption, MASS) on at least 50k tokens each, and that their labels point at the right tokens."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_modules.objectives.corruption.denoising import (
    NoiseConfig,
    apply_noise,
    document_rotation,
    infilling_spans,
    poisson_lengths,
    sentence_permutation,
    text_infilling,
    token_deletion,
    token_masking,
)
from lightning_modules.objectives.corruption.sentinels import (
    mass_span,
    random_segmentation,
    random_spans_noise_mask,
    sentinel_corrupt,
)
from lightning_modules.objectives.corruption.word_spans import (
    span_boundaries,
    span_select,
    truncated_geometric_lengths,
    truncated_geometric_mean,
    whole_word_select,
    word_index,
    word_start_positions,
)

CLS, SEP, PAD, MASK, STOP = 2, 3, 0, 4, 5
ORDINARY = 10  # ordinary ids are >= 10


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def framed_rows(rows: int = 240, length: int = 300, seed: int = 0):
    """[CLS] body [SEP] PAD..., with ~1/3 of body tokens continuations of the previous word."""
    g = gen(seed)
    ids = torch.randint(ORDINARY, 1000, (rows, length), generator=g)
    word_start = torch.rand(rows, length, generator=g) > 0.35
    lengths = torch.randint(length // 2, length + 1, (rows,), generator=g)
    mask = torch.arange(length)[None] < lengths[:, None]
    ids[:, 0] = CLS
    ids[torch.arange(rows), lengths - 1] = SEP
    ids = ids.masked_fill(~mask, PAD)
    special = torch.isin(ids, torch.tensor([CLS, SEP, PAD]))
    return ids, special, word_start


def test_whole_word_masking_rate_and_words_never_split():
    ids, special, word_start = framed_rows()
    assert (~special).sum() >= 50_000
    selected = whole_word_select(word_start, special, 0.15, gen(1))
    rate = selected.sum().item() / (~special).sum().item()
    assert abs(rate - 0.15) < 0.01, rate
    assert not (selected & special).any()
    # Every token of a word shares its first token's selection.
    starts = word_start_positions(word_start, special)
    first = word_index(starts)
    valid = ~special
    assert torch.equal(selected[valid], selected.gather(1, first)[valid])
    # Words really have several tokens, so the check above is not vacuous.
    assert (valid & ~starts).sum() > 10_000
    # Seeded: same generator seed -> same mask; another seed -> another mask.
    assert torch.equal(selected, whole_word_select(word_start, special, 0.15, gen(1)))
    assert not torch.equal(selected, whole_word_select(word_start, special, 0.15, gen(2)))


def test_truncated_geometric_lengths_mean():
    lengths = truncated_geometric_lengths(100_000, 0.2, 10, gen(0))
    assert lengths.min() >= 1 and lengths.max() == 10
    expected = truncated_geometric_mean(0.2, 10)
    assert abs(expected - 3.8) < 0.01  # SpanBERT's reported mean span length (3.8)
    assert abs(lengths.float().mean().item() - expected) < 0.03
    # P(length = k) = p (1-p)^(k-1) / (1 - (1-p)^10)
    for k in (1, 2, 10):
        expected_k = 0.2 * 0.8 ** (k - 1) / (1 - 0.8**10)
        assert abs((lengths == k).float().mean().item() - expected_k) < 0.006


@pytest.mark.parametrize("use_words", [False, True])
def test_span_masking_rate_contiguity_and_lengths(use_words):
    ids, special, word_start = framed_rows(rows=240)
    assert (~special).sum() >= 50_000
    selected = span_select(
        special, 0.15, gen(3), geometric_p=0.2, max_span_length=10, word_start=word_start if use_words else None
    )
    valid_per_row = (~special).sum(1).float()
    per_row = selected.sum(1).float() / valid_per_row
    assert torch.all((per_row - 0.15).abs() <= 1.0 / valid_per_row + 1e-6)  # each row hits its budget
    assert not (selected & special).any()
    # Runs of selected tokens: their mean length is near the span length mean (merges and the
    # budget cut move it a little), and far from the 1.0 of i.i.d. token masking.
    runs = []
    for row in selected.tolist():
        n = 0
        for s in row + [False]:
            if s:
                n += 1
            elif n:
                runs.append(n)
                n = 0
    mean_run = sum(runs) / len(runs)
    if not use_words:
        assert 3.0 < mean_run < 5.0, mean_run
    else:
        assert mean_run > 3.5, mean_run  # spans of whole words are longer in tokens
        starts = word_start_positions(word_start, special)
        first = word_index(starts)
        # Whole words except the budget-cut last span of a row: at most one split word per row.
        split = (selected != selected.gather(1, first)) & ~special
        assert split.sum(1).max() <= 10


def test_span_boundaries_point_at_unselected_neighbours():
    selected = torch.tensor([[False, True, True, True, False, False, True, False]])
    left, right, offset = span_boundaries(selected)
    assert left[0, 1:4].tolist() == [0, 0, 0] and right[0, 1:4].tolist() == [4, 4, 4]
    assert offset[0, 1:4].tolist() == [0, 1, 2]
    assert left[0, 6] == 5 and right[0, 6] == 7 and offset[0, 6] == 0
    ids, special, _ = framed_rows(rows=40)
    sel = span_select(special, 0.15, gen(0))
    left, right, _ = span_boundaries(sel)
    assert not sel.gather(1, left)[sel].any() and not sel.gather(1, right)[sel].any()


# -- BART ----------------------------------------------------------------------------------------


def long_body(n: int = 60_000, seed: int = 0) -> torch.Tensor:
    ids = torch.randint(ORDINARY, 1000, (n,), generator=gen(seed))
    ids[torch.rand(n, generator=gen(seed + 1)) < 0.05] = STOP  # sentences of ~20 tokens
    return ids


def test_token_masking_and_deletion_rates():
    ids = long_body()
    masked = token_masking(ids, 0.3, MASK, gen(0))
    assert masked.shape == ids.shape
    changed = masked != ids
    assert abs(changed.float().mean().item() - 0.3) < 0.01
    assert torch.all(masked[changed] == MASK)
    kept = token_deletion(ids, 0.25, gen(0))
    assert abs(1 - kept.numel() / ids.numel() - 0.25) < 0.01
    # Deletion keeps order: the result is a subsequence of the input.
    it = iter(ids.tolist())
    assert all(any(v == w for w in it) for v in kept.tolist())


def test_text_infilling_poisson_spans_one_mask_each():
    lengths = poisson_lengths(100_000, 3.0, gen(0))
    assert abs(lengths.float().mean().item() - 3.0) < 0.03
    assert abs((lengths == 0).float().mean().item() - math.exp(-3)) < 0.005
    ids = long_body()
    spans = infilling_spans(ids.numel(), 0.3, gen(1))
    covered = sum(length for _, length in spans)
    assert covered == math.ceil(0.3 * ids.numel())
    assert any(length == 0 for _, length in spans)  # insertions happen
    ends = [s + length for s, length in spans]
    assert all(ends[i] <= spans[i + 1][0] for i in range(len(spans) - 1))  # no overlap
    out = text_infilling(ids, 0.3, MASK, gen(1))
    assert (out == MASK).sum().item() == len(spans)  # one mask per span, zero-length ones included
    assert out.numel() == ids.numel() - covered + len(spans)
    # Reconstruct: replacing each mask by its span gives back the original.
    rebuilt, cursor, values = [], 0, ids.tolist()
    for start, length in spans:
        rebuilt.extend(values[cursor:start] + values[start : start + length])
        cursor = start + length
    rebuilt.extend(values[cursor:])
    assert rebuilt == values


def test_sentence_permutation_is_a_permutation_of_sentences():
    ids = long_body()
    ids[-1] = STOP
    out = sentence_permutation(ids, [STOP], gen(0))
    assert sorted(out.tolist()) == sorted(ids.tolist())
    assert not torch.equal(out, ids)

    def sentences(x):
        result, cur = [], []
        for v in x.tolist():
            cur.append(v)
            if v == STOP:
                result.append(tuple(cur))
                cur = []
        return result + ([tuple(cur)] if cur else [])

    # The body ends with a full stop, so sentences are exact: the output is a permutation of them.
    assert sorted(sentences(out)) == sorted(sentences(ids))
    assert sentences(out) != sentences(ids)


def test_document_rotation_is_a_rotation_with_uniform_start():
    ids = torch.arange(100)
    starts = [int(document_rotation(ids, gen(s))[0]) for s in range(600)]
    for s in range(5):
        out = document_rotation(ids, gen(s))
        k = int(out[0])
        assert torch.equal(out, torch.cat([ids[k:], ids[:k]]))
    assert len(set(starts)) > 90  # uniform over positions
    assert abs(sum(starts) / len(starts) - 49.5) < 5


def test_apply_noise_composes_selected_functions():
    ids = long_body(2_000)
    none = apply_noise(ids, NoiseConfig(), MASK, [STOP], gen(0))
    assert torch.equal(none, ids)
    cfg = NoiseConfig(text_infilling=0.3, sentence_permutation=True)
    assert cfg.active() == ["sentence_permutation", "text_infilling"]
    out = apply_noise(ids, cfg, MASK, [STOP], gen(0))
    assert (out == MASK).any() and out.numel() < ids.numel()
    with pytest.raises(ValueError, match="token_deletion"):
        NoiseConfig(token_deletion=1.5)


# -- T5 / MASS -----------------------------------------------------------------------------------


def test_random_segmentation_sums_and_is_positive():
    for seed in range(50):
        seg = random_segmentation(37, 6, gen(seed))
        assert sum(seg) == 37 and len(seg) == 6 and min(seg) >= 1


def test_t5_noise_density_span_means_and_sentinel_targets():
    sentinels = list(range(900, 920))
    noise_total, spans_total, tokens = 0, 0, 0
    for seed in range(500):
        ids = torch.randint(ORDINARY, 800, (120,), generator=gen(seed))
        noise = random_spans_noise_mask(ids.numel(), gen(seed), 0.15, 3.0, max_spans=len(sentinels) - 1)
        source, target = sentinel_corrupt(ids, noise, sentinels)
        n_spans = int((noise[1:] & ~noise[:-1]).sum() + noise[0])
        noise_total += int(noise.sum())
        spans_total += n_spans
        tokens += ids.numel()
        # Sentinels in order; the target reconstructs exactly the noise tokens per sentinel.
        src_sent = [v for v in source.tolist() if v in sentinels]
        assert src_sent == sentinels[:n_spans]
        assert target.tolist()[-1] == sentinels[n_spans]
        rebuilt, tgt = [], target.tolist()
        pieces, cur = {}, None
        for v in tgt:
            if v in sentinels:
                cur = v
                pieces[cur] = []
            else:
                pieces[cur].append(v)
        for v in source.tolist():
            rebuilt.extend(pieces[v] if v in sentinels else [v])
        assert rebuilt == ids.tolist()
        assert source.numel() == ids.numel() - int(noise.sum()) + n_spans
    assert tokens >= 50_000
    assert abs(noise_total / tokens - 0.15) < 0.005
    assert abs(noise_total / spans_total - 3.0) < 0.1


def test_t5_span_count_respects_sentinel_budget():
    noise = random_spans_noise_mask(1000, gen(0), 0.15, 3.0, max_spans=19)
    n_spans = int((noise[1:] & ~noise[:-1]).sum() + noise[0])
    assert n_spans == 19 and int(noise.sum()) == 150


def test_mass_fragment_is_contiguous_half_and_labels_match():
    starts = []
    total = 0
    for seed in range(500):
        ids = torch.randint(ORDINARY, 800, (101 + seed % 20,), generator=gen(seed))
        source, fragment, start = mass_span(ids, MASK, gen(seed), ratio=0.5)
        m = fragment.numel()
        total += ids.numel()
        assert m == round(0.5 * ids.numel())
        assert torch.equal(fragment, ids[start : start + m])
        assert torch.all(source[start : start + m] == MASK)
        assert torch.equal(torch.cat([source[:start], source[start + m :]]), torch.cat([ids[:start], ids[start + m :]]))
        starts.append(start / (ids.numel() - m))
    assert total >= 50_000
    assert abs(sum(starts) / len(starts) - 0.5) < 0.05  # start uniform over the possible offsets

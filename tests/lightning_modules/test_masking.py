"""Statistics of BERT masking (`mask_tokens`) on >100k eligible tokens."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.objectives.masking import IGNORE_INDEX, mask_tokens, replacement_pool, select_tokens

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL = (PAD, UNK, CLS, SEP, MASK)
VOCAB = 1000


def token_batch(rows: int = 160, length: int = 1024, seed: int = 0):
    """[CLS] w w ... [SEP] [PAD]...: ordinary ids in [5, VOCAB), right padding of varying length."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(len(SPECIAL), VOCAB, (rows, length), generator=g)
    lengths = torch.randint(length // 2, length + 1, (rows,), generator=g)
    lengths[0] = length
    positions = torch.arange(length)[None, :]
    attention_mask = (positions < lengths[:, None]).long()
    ids[:, 0] = CLS
    ids[torch.arange(rows), lengths - 1] = SEP
    ids = ids.masked_fill(attention_mask == 0, PAD)
    special = torch.isin(ids, torch.tensor(SPECIAL)) | (attention_mask == 0)
    return ids, special


def run_mask(ids, special, seed=0, **kw):
    gen = torch.Generator().manual_seed(seed)
    return mask_tokens(ids, special, VOCAB, MASK, gen, special_token_ids=SPECIAL, **kw)


@pytest.mark.parametrize(
    "mask_prob, mask_token_prob, random_token_prob", [(0.15, 0.8, 0.1), (0.4, 0.5, 0.25), (0.05, 1.0, 0.0)]
)
def test_selection_rate_and_split(mask_prob, mask_token_prob, random_token_prob):
    ids, special = token_batch()
    eligible = ~special
    assert eligible.sum() >= 100_000
    corrupted, labels = run_mask(
        ids, special, mask_prob=mask_prob, mask_token_prob=mask_token_prob, random_token_prob=random_token_prob
    )
    selected = labels != IGNORE_INDEX
    rate = selected.sum().item() / eligible.sum().item()
    assert abs(rate - mask_prob) < 0.01, rate

    n = selected.sum().item()
    became_mask = (corrupted == MASK) & selected
    unchanged = (corrupted == ids) & selected
    became_random = selected & ~became_mask & ~unchanged
    assert abs(became_mask.sum().item() / n - mask_token_prob) < 0.02
    # A random draw equals the original token with probability 1/|pool|; it then counts as unchanged.
    pool = VOCAB - len(SPECIAL)
    expected_random = random_token_prob * (1 - 1 / pool)
    assert abs(became_random.sum().item() / n - expected_random) < 0.02
    assert abs(unchanged.sum().item() / n - (1 - mask_token_prob - expected_random)) < 0.02


def test_special_and_padding_never_selected_and_labels_are_originals():
    ids, special = token_batch()
    corrupted, labels = run_mask(ids, special, mask_prob=0.5)
    selected = labels != IGNORE_INDEX
    assert not (selected & special).any()
    assert torch.equal(corrupted[special], ids[special])  # [CLS]/[SEP]/[PAD] untouched
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(corrupted[~selected], ids[~selected])  # only selected positions change
    assert corrupted.shape == ids.shape and corrupted.dtype == ids.dtype


def test_random_replacements_come_from_ordinary_tokens_across_the_vocabulary():
    ids, special = token_batch()
    corrupted, labels = run_mask(ids, special, mask_prob=0.5, mask_token_prob=0.0, random_token_prob=1.0)
    selected = labels != IGNORE_INDEX
    replaced = corrupted[selected]
    assert not torch.isin(replaced, torch.tensor(SPECIAL)).any()  # never [PAD]/[CLS]/[MASK]...
    assert replaced.min() >= len(SPECIAL) and replaced.max() < VOCAB
    assert replaced.unique().numel() > 0.95 * (VOCAB - len(SPECIAL))  # uniform over the pool


def test_seeds_fix_the_masks_and_different_seeds_differ():
    ids, special = token_batch(rows=16, length=256)
    a = run_mask(ids, special, seed=1)
    b = run_mask(ids, special, seed=1)
    c = run_mask(ids, special, seed=2)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])
    # One generator drawn twice gives a fresh mask each time (dynamic masking).
    gen = torch.Generator().manual_seed(3)
    first = mask_tokens(ids, special, VOCAB, MASK, gen, special_token_ids=SPECIAL)[1]
    second = mask_tokens(ids, special, VOCAB, MASK, gen, special_token_ids=SPECIAL)[1]
    assert not torch.equal(first, second)


def test_select_tokens_and_pool_edge_cases():
    gen = torch.Generator().manual_seed(0)
    everything_special = torch.ones(4, 8, dtype=torch.bool)
    assert not select_tokens(everything_special, 1.0, gen).any()
    assert select_tokens(torch.zeros(4, 8, dtype=torch.bool), 1.0, gen).all()
    assert replacement_pool(6, [0, 1, 2]).tolist() == [3, 4, 5]
    with pytest.raises(ValueError, match="mask_prob"):
        select_tokens(everything_special, 1.5, gen)
    with pytest.raises(ValueError, match="random_token_prob"):
        run_mask(*token_batch(rows=2, length=16), mask_token_prob=0.9, random_token_prob=0.2)
    with pytest.raises(ValueError, match="vocab_size=3"):
        replacement_pool(3, [0, 1, 2])

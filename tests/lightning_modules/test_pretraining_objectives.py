"""The encoder objectives of the pre-training zoo on a real WordPiece tokenizer: whole-word,
span (SpanBERT + SBO) and static masking, NSP/SOP, translation LM, contrastive sentence and
DIM span-contrastive losses. Each one's corruption is checked against its batch and each
overfits one batch with a tiny encoder."""

from __future__ import annotations

import random

import pytest
import torch

from lightning_modules.models.transformer import TransformerDecoder, TransformerEncoder
from lightning_modules.objectives.contrastive import ContrastiveSentenceObjective
from lightning_modules.objectives.masking import IGNORE_INDEX
from lightning_modules.objectives.mlm_span import SpanMaskedLMObjective
from lightning_modules.objectives.mlm_static import StaticMaskedLMObjective
from lightning_modules.objectives.mlm_wwm import WholeWordMaskedLMObjective
from lightning_modules.objectives.nsp import NextSentencePredictionObjective
from lightning_modules.objectives.sop import SentenceOrderPredictionObjective
from lightning_modules.objectives.span_contrastive import SpanContrastiveObjective, sample_ngram_spans
from lightning_modules.objectives.tlm import TranslationLMObjective, restarted_positions
from ptmlab.errors import ConfigError, DataError

SUBJECTS = ["the cat", "a dog", "my neighbour", "the old farmer", "every child", "her brother", "the teacher"]
VERBS = ["watched", "followed", "painted", "remembered", "carried", "found", "admired"]
OBJECTS = ["the river", "a small boat", "the garden gate", "an apple tree", "the red kite", "two letters"]
TAILS = ["before dawn", "in the rain", "with great care", "after supper", "near the market", "unbelievably"]


def lines(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join((rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(TAILS))) + "."
        for _ in range(n)
    ]


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    # A small vocabulary, so longer words split into several "##" pieces.
    tok.train_from_iterator(lines(400), trainers.WordPieceTrainer(vocab_size=120, special_tokens=specials))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def encoder(tokenizer, dropout: float = 0.0) -> TransformerEncoder:
    torch.manual_seed(0)
    return TransformerEncoder(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
        dropout=dropout,
        attention_dropout=dropout,
    )


def single_batch(tokenizer, n: int = 8, seed: int = 1, repeat: int = 1) -> dict[str, torch.Tensor]:
    enc = tokenizer(lines(n, seed), padding=True, return_tensors="pt")
    return {k: enc[k].repeat(repeat, 1) for k in ("input_ids", "attention_mask")}


def pair_batch(tokenizer, n: int = 8, seed: int = 2, swap: bool = False) -> dict[str, torch.Tensor]:
    rng = random.Random(seed)
    a, b = lines(n, seed), lines(n, seed + 100)
    labels = [rng.random() < 0.5 for _ in range(n)]
    firsts, seconds = [], []
    for x, y, keep in zip(a, b, labels):
        # Positives: B restates A's subject; negatives: unrelated (NSP) or swapped (SOP).
        follow = f"then {x.split()[1]} slept."
        if keep:
            firsts.append(x), seconds.append(follow)
        elif swap:
            firsts.append(follow), seconds.append(x)
        else:
            firsts.append(x), seconds.append(y)
    enc = tokenizer(firsts, seconds, padding=True, return_tensors="pt", return_token_type_ids=True)
    return {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "token_type_ids": enc["token_type_ids"],
        "pair_label": torch.tensor(labels, dtype=torch.long),
    }


def overfit(objective, backbone, batch, steps: int, lr: float = 3e-3) -> list[float]:
    params = list(backbone.parameters()) + [
        p for p in objective.parameters() if all(p is not q for q in backbone.parameters())
    ]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    losses = []
    for _ in range(steps):
        loss = objective(batch, backbone).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def mean_tail(losses: list[float], n: int = 10) -> float:
    return sum(losses[-n:]) / n


# -- masking variants --------------------------------------------------------------------------


def test_whole_word_masking_masks_words_together_and_overfits(tokenizer):
    backbone = encoder(tokenizer)
    objective = WholeWordMaskedLMObjective(backbone, tokenizer, mask_prob=0.3, seed=0)
    batch = single_batch(tokenizer, n=64)
    _, labels = objective.corrupt(batch)
    selected = labels != IGNORE_INDEX
    continuation = torch.tensor([tokenizer.convert_ids_to_tokens(i).startswith("##") for i in range(len(tokenizer))])
    is_cont = continuation[batch["input_ids"]]
    assert is_cont.sum() > 50  # the vocabulary really splits words
    # A continuation piece is selected exactly when the piece before it is.
    prev_selected = torch.zeros_like(selected)
    prev_selected[:, 1:] = selected[:, :-1]
    assert torch.equal(selected[is_cont], prev_selected[is_cont])
    assert torch.equal(labels[selected], batch["input_ids"][selected])

    small = single_batch(tokenizer, n=8, repeat=2)
    losses = overfit(objective, backbone, small, 80, lr=5e-3)
    assert mean_tail(losses) < 0.3 * losses[0], (losses[0], mean_tail(losses))


def test_span_masking_with_boundary_objective_overfits(tokenizer):
    backbone = encoder(tokenizer)
    objective = SpanMaskedLMObjective(backbone, tokenizer, mask_prob=0.2, seed=0)
    batch = single_batch(tokenizer, n=64)
    _, labels = objective.corrupt(batch)
    selected = labels != IGNORE_INDEX
    runs = (selected[:, 1:] & ~selected[:, :-1]).sum().item()
    assert selected.sum().item() / max(runs, 1) > 2.0  # contiguous spans, not scattered tokens
    out = objective(batch, backbone)
    assert {"mlm_acc", "sbo_loss", "sbo_acc"} <= set(out.metrics)
    # The SBO head is trained: its gradient is non-zero.
    out.loss.backward()
    assert objective.boundary_head.mlp[0].weight.grad.abs().sum() > 0

    backbone = encoder(tokenizer)
    objective = SpanMaskedLMObjective(backbone, tokenizer, mask_prob=0.2, seed=0)
    losses = overfit(objective, backbone, single_batch(tokenizer, n=8, repeat=2), 80, lr=5e-3)
    assert mean_tail(losses) < 0.3 * losses[0], (losses[0], mean_tail(losses))
    without = SpanMaskedLMObjective(backbone, tokenizer, span_boundary_objective=False)
    assert without.boundary_head is None and "sbo_loss" not in without(batch, backbone).metrics
    with pytest.raises(ConfigError, match="geometric_p"):
        SpanMaskedLMObjective(backbone, tokenizer, geometric_p=0.0)


def test_static_masking_is_fixed_per_example_and_overfits(tokenizer):
    backbone = encoder(tokenizer)
    objective = StaticMaskedLMObjective(backbone, tokenizer, seed=7)
    batch = single_batch(tokenizer, n=16)
    first = objective.corrupt(batch)[1]
    assert torch.equal(first, objective.corrupt(batch)[1])  # the same mask every time it is seen
    # Per example, not per batch position: a shuffled batch carries the same masks along.
    order = torch.randperm(16, generator=torch.Generator().manual_seed(0))
    shuffled = {k: v[order] for k, v in batch.items()}
    assert torch.equal(objective.corrupt(shuffled)[1], first[order])
    # Another run seed gives other masks; the rate is still mask_prob.
    other = StaticMaskedLMObjective(backbone, tokenizer, seed=8).corrupt(batch)[1]
    assert not torch.equal(first, other)
    big = single_batch(tokenizer, n=800, seed=3)
    labels = objective.corrupt(big)[1]
    eligible = big["attention_mask"].bool() & ~torch.isin(big["input_ids"], torch.tensor(tokenizer.all_special_ids))
    assert abs((labels != IGNORE_INDEX).sum().item() / eligible.sum().item() - 0.15) < 0.015

    losses = overfit(objective, backbone, single_batch(tokenizer, n=8), 50, lr=5e-3)
    assert mean_tail(losses) < 0.1 * losses[0], (losses[0], mean_tail(losses))


# -- sentence pairs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, swap", [(NextSentencePredictionObjective, False), (SentenceOrderPredictionObjective, True)]
)
def test_pair_objectives_overfit_and_need_pairs(tokenizer, cls, swap):
    backbone = encoder(tokenizer)
    objective = cls(backbone, tokenizer)
    batch = pair_batch(tokenizer, n=16, swap=swap)
    assert 0 < batch["pair_label"].sum() < 16
    losses = overfit(objective, backbone, batch, 60)
    assert mean_tail(losses) < 0.1, losses[-10:]
    assert float(objective(batch, backbone).metrics[f"{objective.name}_acc"]) == 1.0
    with pytest.raises(DataError, match="data.construction=segment_pairs"):
        objective(single_batch(tokenizer), backbone)
    with pytest.raises(ConfigError, match="causal"):
        cls(TransformerDecoder(vocab_size=len(tokenizer), hidden_size=32, num_heads=2), tokenizer)


# -- translation LM ---------------------------------------------------------------------------


def test_tlm_restarts_positions_at_the_target_and_overfits(tokenizer):
    types = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1]])
    assert restarted_positions(types).tolist() == [[0, 1, 2, 0, 1, 2, 3], [0, 1, 2, 3, 4, 0, 1]]
    backbone = encoder(tokenizer)
    objective = TranslationLMObjective(backbone, tokenizer, seed=0)
    batch = pair_batch(tokenizer, n=8)
    batch = {k: v.repeat(2, 1) if v.dim() == 2 else v.repeat(2) for k, v in batch.items()}
    # Positions really are passed: the loss differs from plain MLM positions under the same masks.
    plain = TranslationLMObjective(backbone, tokenizer, reset_positions=False, seed=0)
    backbone.eval()
    assert abs(objective(batch, backbone).loss.item() - plain(batch, backbone).loss.item()) > 1e-6
    backbone.train()
    losses = overfit(objective, backbone, batch, 100, lr=5e-3)
    assert mean_tail(losses) < 0.35 * losses[0], (losses[0], mean_tail(losses))
    with pytest.raises(DataError, match="data=parallel_text"):
        objective(single_batch(tokenizer), backbone)


def test_parallel_corpus_reader(tmp_path):
    from lightning_modules.data.parallel import ParallelTextCorpus

    fixture = ParallelTextCorpus(str(__import__("pathlib").Path(__file__).parents[1] / "fixtures" / "parallel"))
    pairs = list(fixture.pairs())
    assert len(pairs) == 120 and all(a and b for a, b in pairs)
    assert next(iter(fixture.documents())) == list(pairs[0])
    bad = tmp_path / "bad.tsv"
    bad.write_text("one\tun\ntwo deux\n")
    with pytest.raises(DataError, match=r"bad.tsv:2: expected 'source<TAB>target'"):
        list(ParallelTextCorpus(str(bad)).documents())


# -- contrastive -------------------------------------------------------------------------------


def test_contrastive_sentence_objective_overfits(tokenizer):
    backbone = encoder(tokenizer, dropout=0.1)
    objective = ContrastiveSentenceObjective(backbone, tokenizer, temperature=0.05)
    batch = single_batch(tokenizer, n=16)
    losses = overfit(objective, backbone, batch, 30, lr=1e-3)
    assert mean_tail(losses) < 0.05, (losses[0], mean_tail(losses))
    with pytest.raises(ConfigError, match="temperature"):
        ContrastiveSentenceObjective(backbone, tokenizer, temperature=0.0)
    with pytest.raises(ConfigError, match="pooling=mean"):
        ContrastiveSentenceObjective(
            TransformerDecoder(vocab_size=len(tokenizer), hidden_size=32, num_heads=2), pooling="cls"
        )


def test_ngram_spans_stay_inside_ordinary_tokens():
    g = torch.Generator().manual_seed(0)
    special = torch.zeros(2000, 40, dtype=torch.bool)
    special[:, 0] = special[:, 20] = special[:, 39] = True
    special[:, 30:] = True
    starts, lengths = sample_ngram_spans(special, 5, g)
    assert lengths.min() >= 1 and lengths.max() == 5
    assert abs(lengths.float().mean().item() - 3.0) < 0.1
    for s, n in zip(starts.tolist(), lengths.tolist()):
        assert not special[0, s : s + n].any()
    assert (starts > 20).any() and (starts < 20).any()


def test_span_contrastive_objective_overfits(tokenizer):
    backbone = encoder(tokenizer)
    objective = SpanContrastiveObjective(backbone, tokenizer, max_ngram=5, seed=0)
    batch = single_batch(tokenizer, n=16)
    masked, ngram, ngram_mask = objective.views(batch)
    hidden = masked == tokenizer.mask_token_id
    # The n-gram view holds exactly the tokens masked out of the sentence view.
    for row in range(16):
        n = int(hidden[row].sum())
        assert 1 <= n <= 5
        assert ngram[row, 1 : n + 1].tolist() == batch["input_ids"][row][hidden[row]].tolist()
        assert int(ngram_mask[row].sum()) == n + 2
    losses = overfit(objective, backbone, batch, 60, lr=1e-3)
    # Chance is ln(16) = 2.77; n-grams shared by several sentences keep the floor above 0.
    assert mean_tail(losses) < 0.45 * losses[0], (losses[0], mean_tail(losses))

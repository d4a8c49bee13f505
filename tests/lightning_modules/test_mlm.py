"""MaskedLMObjective with a real WordPiece tokenizer: dynamic seeded masking, the tied head,
bad configurations, and a tiny TransformerEncoder overfitting one batch."""

from __future__ import annotations

import random

import lightning.pytorch as pl
import pytest
import torch

from lightning_modules.models.transformer import TransformerDecoder, TransformerEncoder
from lightning_modules.objectives.masking import IGNORE_INDEX
from lightning_modules.objectives.mlm import MaskedLMObjective
from ptmlab.errors import ConfigError

SUBJECTS = ["the cat", "a dog", "my neighbour", "the old farmer", "every child", "her brother", "the teacher"]
VERBS = ["watched", "followed", "painted", "remembered", "carried", "found", "admired"]
OBJECTS = ["the river", "a small boat", "the garden gate", "an apple tree", "the red kite", "two letters"]
TAILS = ["before dawn", "in the rain", "with great care", "after supper", "near the market", ""]


def generated_lines(n: int = 400, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(filter(None, (rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(TAILS)))) + "."
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
    tok.train_from_iterator(generated_lines(), trainers.WordPieceTrainer(vocab_size=200, special_tokens=specials))
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


def encoder(vocab_size: int, dropout: float = 0.1) -> TransformerEncoder:
    return TransformerEncoder(
        vocab_size=vocab_size,
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
        dropout=dropout,
        attention_dropout=dropout,
    )


def batch_of(tokenizer, n: int = 8, seed: int = 1) -> dict[str, torch.Tensor]:
    enc = tokenizer(generated_lines(n, seed=seed), padding=True, return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


def test_forward_masks_only_ordinary_tokens_and_reports_metrics(tokenizer):
    backbone = encoder(len(tokenizer))
    objective = MaskedLMObjective(backbone, tokenizer, seed=0)
    batch = batch_of(tokenizer, n=32)
    corrupted, labels = objective.corrupt(batch)
    special = torch.isin(batch["input_ids"], torch.tensor(tokenizer.all_special_ids)) | (batch["attention_mask"] == 0)
    assert (batch["attention_mask"] == 0).any()  # the batch really has padding
    assert not (labels[special] != IGNORE_INDEX).any()
    assert torch.equal(corrupted[special], batch["input_ids"][special])
    selected = labels != IGNORE_INDEX
    assert torch.equal(labels[selected], batch["input_ids"][selected])
    assert (corrupted == tokenizer.mask_token_id).any()

    out = objective(batch, backbone)
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    assert 0.0 <= float(out.metrics["mlm_acc"]) <= 1.0
    assert 0 < out.num_predicted_tokens < int(batch["attention_mask"].sum())
    # Near ln(V) at initialisation: the head is not secretly seeing the answer.
    assert abs(out.loss.item() - torch.log(torch.tensor(float(len(tokenizer)))).item()) < 1.5


def test_head_is_tied_to_input_embeddings(tokenizer):
    backbone = encoder(len(tokenizer))
    objective = MaskedLMObjective(backbone, tokenizer, seed=0)
    own = {id(p) for p in objective.parameters()}
    assert id(backbone.get_input_embeddings().weight) not in own  # one matrix, owned by the backbone
    assert all(p.shape != backbone.get_input_embeddings().weight.shape for p in objective.parameters())
    assert objective.head.bias.shape == (len(tokenizer),)
    out = objective(batch_of(tokenizer), backbone)
    out.loss.backward()
    grad = backbone.get_input_embeddings().weight.grad
    # The decoder's gradient reaches rows of tokens that never occur in the input (only via tying).
    unused = torch.ones(len(tokenizer), dtype=torch.bool)
    unused[batch_of(tokenizer)["input_ids"].unique()] = False
    unused[tokenizer.mask_token_id] = False
    assert unused.any() and grad[unused].abs().sum() > 0


def test_masking_is_dynamic_seeded_from_global_seed_and_resumable(tokenizer):
    backbone = encoder(len(tokenizer))
    batch = batch_of(tokenizer, n=16)
    pl.seed_everything(123, verbose=False)
    a = MaskedLMObjective(backbone, tokenizer)
    b = MaskedLMObjective(backbone, tokenizer)
    first_a, first_b = a.corrupt(batch)[1], b.corrupt(batch)[1]
    assert torch.equal(first_a, first_b)  # same global seed, same stream
    second_a = a.corrupt(batch)[1]
    assert not torch.equal(first_a, second_a)  # a fresh draw each step
    pl.seed_everything(124, verbose=False)
    assert not torch.equal(MaskedLMObjective(backbone, tokenizer).corrupt(batch)[1], first_a)

    # Resume: the generator state travels in the state_dict.
    pl.seed_everything(123, verbose=False)
    state = a.state_dict()
    resumed = MaskedLMObjective(backbone, tokenizer)
    resumed.load_state_dict(state)
    assert torch.equal(resumed.corrupt(batch)[1], a.corrupt(batch)[1])

    # Evaluation: the same masks on every validation pass, independent of training draws.
    a.eval()
    val_1 = a.corrupt(batch)[1]
    a.train()
    a.corrupt(batch)
    a.eval()
    assert torch.equal(a.corrupt(batch)[1], val_1)


def test_bad_configurations_fail_with_the_key(tokenizer):
    decoder = TransformerDecoder(vocab_size=len(tokenizer), hidden_size=32, num_heads=2)
    with pytest.raises(ConfigError, match="objective=mlm.*causal"):
        MaskedLMObjective(decoder, tokenizer)
    with pytest.raises(ConfigError, match="mask_prob"):
        MaskedLMObjective(encoder(len(tokenizer)), tokenizer, mask_prob=0.0)
    with pytest.raises(ConfigError, match="random_token_prob"):
        MaskedLMObjective(encoder(len(tokenizer)), tokenizer, mask_token_prob=0.95, random_token_prob=0.1)

    class NoMask:
        mask_token_id = None
        all_special_ids = [0]

    with pytest.raises(ConfigError, match="mask_token_id"):
        MaskedLMObjective(encoder(len(tokenizer)), NoMask())


def test_tiny_encoder_overfits_one_batch(tokenizer):
    torch.manual_seed(0)
    backbone = encoder(len(tokenizer), dropout=0.0)
    objective = MaskedLMObjective(backbone, tokenizer, seed=0)
    # 8 sentences, each 4 times: ~50 predicted tokens a step keeps the loss curve readable.
    batch = {k: v.repeat(4, 1) for k, v in batch_of(tokenizer, n=8, seed=5).items()}
    params = list(backbone.parameters()) + list(objective.parameters())
    optimizer = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.0)
    losses = []
    for _ in range(200):
        loss = objective(batch, backbone).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # Masks change every step, so the model must memorise the sentences, not one mask.
    final = sum(losses[-20:]) / 20
    assert final < 0.1 * losses[0], (losses[0], final)


class FactorisedEmbeddingEncoder(TransformerEncoder):
    """ALBERT-style V×E token embeddings projected to H, as a variant would add them."""

    embedding_size = 16

    def build_embeddings(self):
        from torch import nn

        from lightning_modules.models.transformer import TransformerEmbeddings

        class Factorised(TransformerEmbeddings):
            def __init__(self, owner):
                super().__init__(
                    owner.vocab_size,
                    owner.embedding_size,
                    owner.max_position_embeddings,
                    owner.type_vocab_size,
                    owner.dropout,
                    owner.layer_norm_eps,
                )
                self.projection = nn.Linear(owner.embedding_size, owner.hidden_size)

            def forward(self, *args, **kwargs):
                return self.projection(super().forward(*args, **kwargs))  # B×T×E -> B×T×H

        return Factorised(self)


def test_head_follows_the_embedding_width_of_a_factorised_variant(tokenizer):
    backbone = FactorisedEmbeddingEncoder(
        vocab_size=len(tokenizer), hidden_size=32, num_heads=2, max_position_embeddings=64
    )
    assert backbone.get_input_embeddings().weight.shape == (len(tokenizer), 16)
    objective = MaskedLMObjective(backbone, tokenizer, seed=0)
    assert objective.head.dense.weight.shape == (16, 32)  # H -> E, then the tied E -> V decoder
    out = objective(batch_of(tokenizer), backbone)
    out.loss.backward()
    assert torch.isfinite(out.loss) and backbone.get_input_embeddings().weight.grad is not None


def test_an_objective_is_built_from_its_declaration(tokenizer):
    """Each part of an `objective` node is built from its declaration validated once (one line
    naming the node's path on a bad value); in code, keywords are validated the same way."""
    from omegaconf import OmegaConf

    from lightning_modules.objectives.parts import build_objectives
    from lightning_modules.stages.pretrain import build_backbone
    from ptmlab.config import compose_config
    from ptmlab.methods.objectives import MaskedLMParams, SpanContrastiveParams

    overrides = ["stage=pretrain", "model=bert_tiny", "objective=mlm_span_contrastive"]
    cfg = compose_config([*overrides, "objective.objectives.mlm.module.mask_prob=0.3"])
    backbone = build_backbone(cfg.model, len(tokenizer))
    objectives, weights = build_objectives(cfg.objective, backbone, tokenizer)
    assert weights == {"mlm": 1.0, "span_contrastive": 1.0}
    assert isinstance(objectives["mlm"].params, MaskedLMParams) and objectives["mlm"].mask_prob == 0.3
    node = OmegaConf.to_container(cfg.objective.objectives.span_contrastive.module)
    assert objectives["span_contrastive"].params == SpanContrastiveParams.model_validate(node)
    # built in code: the values it is not given are the declaration's defaults
    in_code = MaskedLMObjective(backbone, tokenizer, mask_prob=0.2)
    default = MaskedLMParams.model_fields["random_token_prob"].default
    assert (in_code.mask_prob, in_code.random_token_prob) == (0.2, default)
    with pytest.raises(ConfigError, match=r"^objective\.module\.mask_prob=0\.0: "):
        MaskedLMObjective(backbone, tokenizer, mask_prob=0.0)
    cfg.objective.objectives.mlm.module.mask_token_prob = 0.95
    with pytest.raises(ConfigError, match=r"^objective\.objectives\.mlm\.module\.mask_token_prob=0\.95 \+ "):
        build_objectives(cfg.objective, backbone, tokenizer)

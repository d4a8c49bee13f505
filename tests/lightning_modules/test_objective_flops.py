"""The training-FLOPs estimate counts what each objective runs: one backbone pass per part by
default, two for contrastive learning, generator + discriminator for ELECTRA, both streams for
XLNet's permuted LM, no attention term for an LSTM."""

from __future__ import annotations

import pytest

from lightning_modules.models.electra import ElectraPair
from lightning_modules.models.lstm import BidirectionalLSTMLM
from lightning_modules.models.transformer import TransformerEncoder
from lightning_modules.objectives.contrastive import ContrastiveSentenceObjective
from lightning_modules.objectives.mlm import MaskedLMObjective
from lightning_modules.objectives.nsp import NextSentencePredictionObjective
from lightning_modules.objectives.rtd import ReplacedTokenDetectionObjective
from lightning_modules.stages.pretrain_module import (
    count_parameters,
    objectives_flops_per_token,
    training_flops_per_token,
)

T = 64


class Tok:
    mask_token_id, pad_token_id, cls_token_id, sep_token_id = 4, 0, 2, 3
    all_special_ids = [0, 1, 2, 3, 4]


def test_transformer_estimate_is_6n_plus_attention():
    enc = TransformerEncoder(vocab_size=100, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    n = count_parameters(enc) - enc.get_input_embeddings().weight.numel()
    assert training_flops_per_token(enc, T) == 6 * n + 6 * 2 * T * 32
    mlm = MaskedLMObjective(enc, Tok())
    base = training_flops_per_token(enc, T)
    assert objectives_flops_per_token(enc, {"mlm": mlm}, T) == base
    # BERT's MLM + NSP: each part runs its own forward pass.
    assert objectives_flops_per_token(enc, {"mlm": mlm, "nsp": NextSentencePredictionObjective(enc)}, T) == 2 * base
    assert objectives_flops_per_token(enc, {"c": ContrastiveSentenceObjective(enc)}, T) == 2 * base


def test_electra_counts_generator_and_discriminator():
    pair = ElectraPair(
        vocab_size=100,
        embedding_size=32,
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        intermediate_size=128,
        generator_hidden_size=16,
        generator_num_layers=2,
        generator_num_heads=1,
        generator_intermediate_size=32,
    )
    disc_only = training_flops_per_token(pair.discriminator, T)
    rtd = ReplacedTokenDetectionObjective(pair, Tok())
    total = objectives_flops_per_token(pair, {"rtd": rtd}, T)
    gen_weights = count_parameters(pair.generator) - sum(
        p.numel()
        for name, p in pair.generator.named_parameters()
        if name.startswith("embeddings.") and not name.startswith("embeddings.projection")
    )
    assert total == pytest.approx(disc_only + 6 * gen_weights + 6 * 2 * T * 16, rel=0.02)
    assert total > disc_only


def test_lstm_has_no_attention_term():
    lstm = BidirectionalLSTMLM(vocab_size=100, embedding_size=16, hidden_size=32, num_layers=2)
    n = count_parameters(lstm) - lstm.get_input_embeddings().weight.numel()
    assert training_flops_per_token(lstm, T) == 6 * n


def test_permuted_lm_counts_the_query_stream():
    """XLNet's query stream runs every layer again for every position (its own query/output
    projections and feed-forward, attention to the content stream's keys and values)."""
    from lightning_modules.models.xlnet import XLNetEncoder
    from lightning_modules.objectives.plm import PermutedLMObjective

    enc = XLNetEncoder(vocab_size=100, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    base = training_flops_per_token(enc, T)
    total = objectives_flops_per_token(enc, {"plm": PermutedLMObjective(enc, Tok())}, T)
    assert total == base + 6 * 2 * (2 * 32 * 32 + 2 * 32 * 64) + 6 * 2 * T * 32
    assert 1.5 * base < total < 2 * base  # two streams, keys and values computed once

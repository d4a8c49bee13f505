"""Encoder–decoder: parity with Hugging Face BartModel (encoder and decoder states, padding on
both sides), the decoder's causality and cross-attention, shared embeddings, the configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lightning_modules.models.encoder_decoder import EncoderDecoderOutput, TransformerEncoderDecoder

VOCAB = 50
CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"


def tiny(**kw):
    args = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=2,
        num_decoder_layers=3,
        num_heads=4,
        intermediate_size=48,
        max_position_embeddings=24,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return TransformerEncoderDecoder(**{**args, **kw}).eval()


def padded(rows, length, pad_from, seed):
    ids = torch.randint(2, VOCAB, (rows, length), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    for row, start in pad_from.items():
        mask[row, start:] = 0
    return ids.masked_fill(mask == 0, 1), mask


def test_parity_with_hf_bart_model_with_padding():
    torch.manual_seed(0)
    ours = tiny()
    with torch.no_grad():  # non-trivial LayerNorms and biases, so a mapping slip shows
        for p in ours.parameters():
            p.add_(0.05 * torch.randn_like(p))
    theirs = ours.to_hf()
    src, src_mask = padded(3, 10, {1: 6, 2: 3}, seed=1)
    tgt, tgt_mask = padded(3, 7, {0: 5, 2: 2}, seed=2)
    with torch.no_grad():
        mine = ours(
            src, attention_mask=src_mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask, output_attentions=True
        )
        ref = theirs(
            input_ids=src,
            attention_mask=src_mask,
            decoder_input_ids=tgt,
            decoder_attention_mask=tgt_mask,
            output_hidden_states=True,
            output_attentions=True,
        )
    assert isinstance(mine, EncoderDecoderOutput)
    assert len(mine.hidden_states) == 3 and len(mine.decoder_hidden_states) == 4
    for a, b in zip(mine.hidden_states, ref.encoder_hidden_states):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    for a, b in zip(mine.decoder_hidden_states, ref.decoder_hidden_states):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    for a, b in zip(mine.cross_attentions, ref.cross_attentions):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    torch.testing.assert_close(mine.decoder_last_hidden_state, ref.last_hidden_state, atol=1e-5, rtol=0)
    back = TransformerEncoderDecoder.from_hf(theirs).eval()
    with torch.no_grad():
        again = back(src, src_mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask)
    torch.testing.assert_close(again.decoder_last_hidden_state, mine.decoder_last_hidden_state)


def test_decoder_is_causal_and_reads_the_encoder():
    model = tiny()
    src, _ = padded(2, 8, {}, seed=3)
    tgt, _ = padded(2, 6, {}, seed=4)
    changed_tgt = tgt.clone()
    changed_tgt[:, 4:] = (changed_tgt[:, 4:] + 5) % VOCAB
    changed_src = src.clone()
    changed_src[:, -1] = (changed_src[:, -1] + 5) % VOCAB
    with torch.no_grad():
        ref = model(src, decoder_input_ids=tgt, output_attentions=True)
        later = model(src, decoder_input_ids=changed_tgt)
        other_source = model(changed_src, decoder_input_ids=tgt)
        fused = model(src, decoder_input_ids=tgt)  # SDPA's causal path vs the explicit one
    for a, b in zip(ref.decoder_hidden_states[1:], later.decoder_hidden_states[1:]):
        torch.testing.assert_close(a[:, :4], b[:, :4])
        assert not torch.allclose(a[:, 4:], b[:, 4:])
    assert not torch.allclose(ref.decoder_hidden_states[1][:, 0], other_source.decoder_hidden_states[1][:, 0])
    torch.testing.assert_close(fused.decoder_last_hidden_state, ref.decoder_last_hidden_state, atol=1e-5, rtol=0)
    assert ref.decoder_attentions[0].triu(diagonal=1).abs().max() == 0
    assert ref.cross_attentions[0].shape == (2, 4, 6, 8)
    encoder_only = model(src)
    assert encoder_only.decoder_hidden_states is None and len(encoder_only.hidden_states) == 3


def test_shared_embeddings_and_pre_ln_variant():
    model = tiny()
    table = model.get_input_embeddings()
    assert model.decoder.embeddings.word_embeddings is table is model.encoder.embeddings.word_embeddings
    assert model.encoder.embeddings.position_embeddings is not model.decoder.embeddings.position_embeddings
    src, src_mask = padded(2, 5, {1: 3}, seed=5)
    out = model(src, src_mask, decoder_input_ids=src[:, :4])
    out.decoder_last_hidden_state.sum().backward()
    assert table.weight.grad is not None
    pre = tiny(pre_layer_norm=True, activation="relu")
    assert pre.to_hf() is None and pre.decoder.final_layer_norm is not None
    assert pre.encoder.embeddings.layer_norm is None
    with torch.no_grad():
        pre_out = pre(src, src_mask, decoder_input_ids=src[:, :4])
    assert pre_out.decoder_last_hidden_state.shape == (2, 4, 32)
    with pytest.raises(ValueError, match="encoder_hidden_states"):
        model.decoder(src)


@pytest.mark.parametrize("name", ["bart_tiny", "t5_tiny", "bart_base"])
def test_configs(name):
    cfg = OmegaConf.load(CONF_MODEL / f"{name}.yaml")
    assert cfg.family == "encoder_decoder" and cfg.name == name
    if name == "bart_base":
        assert (cfg.backbone.hidden_size, cfg.backbone.num_layers, cfg.backbone.num_decoder_layers) == (768, 6, 6)
        return
    model = instantiate(cfg.backbone, vocab_size=VOCAB).eval()
    assert model.family == "encoder_decoder" and model.vocab_size == VOCAB
    assert type(model.to_hf()).__name__ == {"bart_tiny": "BartModel", "t5_tiny": "T5Model"}[name]
    src, src_mask = padded(2, 6, {1: 4}, seed=6)
    with torch.no_grad():
        out = model(src, src_mask, decoder_input_ids=src, decoder_attention_mask=src_mask)
    assert out.decoder_last_hidden_state.shape == (2, 6, model.hidden_size)

"""TransformerEncoder / TransformerDecoder behaviour beyond Hugging Face parity: extra attention
masks (UniLM-style), padding on either side, layer sharing through a subclass, bad configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lightning_modules.models.transformer import TransformerDecoder, TransformerEncoder
from ptmlab.errors import ConfigError

VOCAB = 50
CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"


def tiny(cls, **kw):
    args = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return cls(**{**args, **kw}).eval()


def ids(rows=2, length=10, seed=0):
    return torch.randint(1, VOCAB, (rows, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(
    "name, cls, family, causal",
    [("bert_tiny", TransformerEncoder, "encoder", False), ("gpt_tiny", TransformerDecoder, "decoder", True)],
)
def test_conf_models_instantiate_with_the_contract_attributes(name, cls, family, causal):
    cfg = OmegaConf.load(CONF_MODEL / f"{name}.yaml")
    backbone = instantiate(cfg.backbone, vocab_size=VOCAB).eval()
    assert type(backbone) is cls and backbone.family == family == cfg.family and backbone.is_causal is causal
    assert (backbone.hidden_size, backbone.num_layers, backbone.vocab_size) == (128, 2, VOCAB)
    assert backbone.get_input_embeddings().weight.shape == (VOCAB, 128)
    out = backbone(ids(), output_attentions=True)
    assert len(out.hidden_states) == 3 and all(h.shape == (2, 10, 128) for h in out.hidden_states)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (2, 2, 10, 10)
    torch.testing.assert_close(out.attentions[0].sum(-1), torch.ones(2, 2, 10))
    assert backbone(ids()).attentions is None


def test_seq2seq_self_attention_mask_on_an_encoder():
    """UniLM's seq2seq mask: source tokens see the source only; target tokens see the source and
    earlier targets. Changing the target must leave source states untouched."""
    model = tiny(TransformerEncoder)
    src, tgt = 6, 4
    t = src + tgt
    allowed = torch.zeros(t, t, dtype=torch.bool)
    allowed[:, :src] = True
    allowed[src:, src:] = torch.ones(tgt, tgt, dtype=torch.bool).tril()
    mask = allowed.expand(2, t, t)  # B×T×T
    x = ids(length=t)
    y = x.clone()
    y[:, src + 2 :] = (y[:, src + 2 :] + 3) % VOCAB
    with torch.no_grad():
        a = model(x, self_attention_mask=mask)
        b = model(y, self_attention_mask=mask[:, None])  # B×1×T×T works too
        explicit = model(x, self_attention_mask=mask, output_attentions=True)
    for ha, hb in zip(a.hidden_states[1:], b.hidden_states[1:]):
        torch.testing.assert_close(ha[:, : src + 2], hb[:, : src + 2])
        assert not torch.allclose(ha[:, src + 2 :], hb[:, src + 2 :])
    for h_sdpa, h_explicit in zip(a.hidden_states, explicit.hidden_states):
        torch.testing.assert_close(h_sdpa, h_explicit, atol=1e-5, rtol=0)
    assert explicit.attentions[0][:, :, ~allowed].abs().max() == 0
    with pytest.raises(ValueError, match="self_attention_mask"):
        model(x, self_attention_mask=torch.ones(2, t, t - 1, dtype=torch.bool))


def test_decoder_with_left_padding_matches_the_unpadded_sequence():
    model = tiny(TransformerDecoder)
    x = ids(rows=1, length=7)
    pad = 3
    padded = torch.cat([torch.zeros(1, pad, dtype=torch.long), x], dim=1)
    attention_mask = torch.cat([torch.zeros(1, pad, dtype=torch.long), torch.ones(1, 7, dtype=torch.long)], dim=1)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        ref = model(x)
        for output_attentions in (False, True):
            out = model(
                padded, attention_mask=attention_mask, position_ids=position_ids, output_attentions=output_attentions
            )
            for h, r in zip(out.hidden_states, ref.hidden_states):
                assert torch.isfinite(h).all()  # fully masked padding rows do not become NaN
                torch.testing.assert_close(h[:, pad:], r, atol=1e-5, rtol=0)


def test_decoder_ignores_token_types_and_pre_ln_has_a_final_norm():
    model = tiny(TransformerDecoder)
    x = ids()
    with torch.no_grad():
        assert torch.equal(model(x).last_hidden_state, model(x, token_type_ids=torch.ones_like(x)).last_hidden_state)
    assert model.final_layer_norm is not None and model.embeddings.layer_norm is None
    encoder = tiny(TransformerEncoder)
    assert encoder.final_layer_norm is None and encoder.embeddings.layer_norm is not None
    with torch.no_grad():  # token types matter to the encoder
        assert not torch.equal(
            encoder(x).last_hidden_state, encoder(x, token_type_ids=torch.ones_like(x)).last_hidden_state
        )


class SharedLayerEncoder(TransformerEncoder):
    """Cross-layer sharing (ALBERT's "all") as a variant would write it: one hook overridden."""

    def build_layers(self):
        layer = self.build_layer()
        return [layer] * self.num_layers


def test_layer_sharing_by_subclassing():
    shared = tiny(SharedLayerEncoder, num_layers=4)
    separate = tiny(TransformerEncoder, num_layers=4)
    per_layer = sum(p.numel() for p in separate.stack.layers[0].parameters())
    n_shared = sum(p.numel() for p in shared.parameters())
    assert n_shared == sum(p.numel() for p in separate.parameters()) - 3 * per_layer
    out = shared(ids())
    assert len(out.hidden_states) == 5
    assert not torch.allclose(out.hidden_states[1], out.hidden_states[2])  # applied repeatedly
    copy = tiny(SharedLayerEncoder, num_layers=4)
    copy.load_state_dict(shared.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(copy(ids()).last_hidden_state, shared(ids()).last_hidden_state)


def test_dropout_only_in_training():
    model = tiny(TransformerEncoder, dropout=0.1, attention_dropout=0.1)
    x = ids()
    with torch.no_grad():
        model.train()
        assert not torch.equal(model(x).last_hidden_state, model(x).last_hidden_state)
        model.eval()
        assert torch.equal(model(x).last_hidden_state, model(x).last_hidden_state)


def test_bad_sizes_fail_naming_the_key():
    with pytest.raises(ConfigError, match="hidden_size=30 .*num_heads=4"):
        tiny(TransformerEncoder, hidden_size=30)
    with pytest.raises(ConfigError, match="activation='swishy'"):
        tiny(TransformerDecoder, activation="swishy")
    with pytest.raises(ConfigError, match="num_layers=0"):
        tiny(TransformerEncoder, num_layers=0)
    with pytest.raises(ConfigError, match="max_position_embeddings=32"):
        tiny(TransformerDecoder)(ids(length=33))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_left_padding_stays_finite(dtype):
    """Fully masked padding rows must not become NaN in half precision (NaN values at padding
    positions would reach real tokens in the next layer through 0 × NaN)."""
    model = tiny(TransformerDecoder, num_layers=3).to(dtype)
    x = ids(rows=2, length=12)
    attention_mask = torch.ones_like(x)
    attention_mask[1, :5] = 0
    with torch.no_grad():
        for output_attentions in (False, True):
            out = model(x, attention_mask=attention_mask, output_attentions=output_attentions)
            assert all(torch.isfinite(h).all() for h in out.hidden_states)


@pytest.mark.parametrize("output_attentions", [False, True])
def test_encoder_padding_as_a_boolean_key_mask_equals_the_additive_bias(monkeypatch, output_attentions):
    """An encoder masking only padding hands SDPA a boolean B×1×1×T key mask instead of an
    additive float bias (issue 28); the outputs are the additive path's, a row of padding only
    included (it attends to every key under both, never NaN)."""
    model = tiny(TransformerEncoder, type_vocab_size=2)
    x = ids(rows=4, length=12, seed=3)
    attention_mask = torch.ones_like(x)
    attention_mask[1, 7:] = 0
    attention_mask[2, 1:] = 0
    attention_mask[3] = 0  # padding only
    mask = model.layer_attention_mask(attention_mask, None, x.shape[1], torch.float32)
    assert mask.dtype == torch.bool and mask.shape == (4, 1, 1, 12)
    with torch.no_grad():
        boolean = model(x, attention_mask=attention_mask, output_attentions=output_attentions)
        monkeypatch.setattr(model, "layer_attention_mask", model.attention_bias)
        additive = model(x, attention_mask=attention_mask, output_attentions=output_attentions)
    for got, expected in zip(boolean.hidden_states, additive.hidden_states, strict=True):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    if output_attentions:
        # The padding-only row's scores sit at -1e4 + O(1) under the additive bias, where a
        # float32 step is ~1e-3: its weights agree to 1e-4, every other row's to 1e-6.
        for got, expected in zip(boolean.attentions, additive.attentions, strict=True):
            torch.testing.assert_close(got[:3], expected[:3], rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(got[3], expected[3], rtol=0, atol=1e-4)

"""UniLM: the four self-attention masks (with padding, token types or source lengths), the encoder
taking `mode` per call, its equivalence with BERT plus an explicit mask, the configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lightning_modules.models.transformer import TransformerEncoder
from lightning_modules.models.unilm import UnilmEncoder, unilm_attention_mask
from ptmlab.errors import ConfigError

VOCAB = 40
CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"


def test_masks_by_hand():
    attention_mask = torch.tensor([[1, 1, 1, 1, 1, 0]])
    types = torch.tensor([[0, 0, 1, 1, 1, 0]])  # [CLS] a | b c [SEP] | pad
    bi = unilm_attention_mask("bidirectional", attention_mask)[0].int()
    assert bi.tolist() == [[1, 1, 1, 1, 1, 0]] * 6
    l2r = unilm_attention_mask("left_to_right", attention_mask)[0].int()
    assert l2r.tolist()[:5] == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
    ]
    r2l = unilm_attention_mask("right_to_left", attention_mask)[0].int()
    assert r2l.tolist()[:5] == [
        [1, 1, 1, 1, 1, 0],
        [0, 1, 1, 1, 1, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 0, 1, 1, 0],
        [0, 0, 0, 0, 1, 0],
    ]
    s2s = unilm_attention_mask("seq2seq", attention_mask, token_type_ids=types)[0].int()
    assert s2s.tolist() == [
        [1, 1, 0, 0, 0, 0],  # source: source only
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],  # target: source + target prefix
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
        [1, 1, 0, 0, 0, 0],
    ]  # padding (type 0) sees the source; nobody sees it
    by_length = unilm_attention_mask("seq2seq", attention_mask, source_lengths=torch.tensor([2]))[0].int()
    assert by_length[:5].tolist() == s2s[:5].tolist()
    with pytest.raises(ConfigError, match="mode='causal'"):
        unilm_attention_mask("causal", attention_mask)
    with pytest.raises(ValueError, match="source_lengths"):
        unilm_attention_mask("seq2seq", attention_mask)


def tiny(cls=UnilmEncoder, **kw):
    args = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=48,
        max_position_embeddings=24,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return cls(**{**args, **kw}).eval()


def batch():
    ids = torch.randint(1, VOCAB, (2, 10), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    types = torch.zeros_like(ids)
    types[0, 4:] = 1
    types[1, 6:8] = 1
    return ids, mask, types


@pytest.mark.parametrize("mode", ["bidirectional", "left_to_right", "right_to_left", "seq2seq"])
def test_mode_equals_bert_with_the_explicit_mask(mode):
    model = tiny()
    bert = tiny(TransformerEncoder)
    bert.load_state_dict(model.state_dict())
    ids, mask, types = batch()
    with torch.no_grad():
        ours = model(ids, mask, types, mode=mode, output_attentions=True)
        explicit = bert(ids, mask, types, self_attention_mask=unilm_attention_mask(mode, mask, types))
    for a, b in zip(ours.hidden_states, explicit.hidden_states):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    allowed = unilm_attention_mask(mode, mask, types)
    # A query row with nothing allowed (padding under right_to_left) spreads evenly, by design.
    forbidden = ~allowed & allowed.any(-1, keepdim=True)
    assert ours.attentions[0].permute(1, 0, 2, 3)[:, forbidden].abs().max() == 0


def test_modes_change_what_a_position_sees():
    model = tiny()
    ids, mask, types = batch()
    changed = ids.clone()
    changed[:, 5] = (changed[:, 5] + 1) % VOCAB
    with torch.no_grad():
        l2r_a, l2r_b = model(ids, mode="left_to_right"), model(changed, mode="left_to_right")
        r2l_a, r2l_b = model(ids, mode="right_to_left"), model(changed, mode="right_to_left")
        bi_a, bi_b = model(ids), model(changed)
    torch.testing.assert_close(l2r_a.last_hidden_state[:, :5], l2r_b.last_hidden_state[:, :5])
    torch.testing.assert_close(r2l_a.last_hidden_state[:, 6:], r2l_b.last_hidden_state[:, 6:])
    assert not torch.allclose(bi_a.last_hidden_state[:, :5], bi_b.last_hidden_state[:, :5])
    # seq2seq: source states do not depend on the target.
    src_len = torch.tensor([5, 5])
    with torch.no_grad():
        s_a = model(ids, mode="seq2seq", source_lengths=src_len)
        s_b = model(changed, mode="seq2seq", source_lengths=src_len)
    torch.testing.assert_close(s_a.last_hidden_state[:, :5], s_b.last_hidden_state[:, :5])
    assert not torch.allclose(s_a.last_hidden_state[:, 5:], s_b.last_hidden_state[:, 5:])


def test_default_mode_config_and_bert_export():
    cfg = OmegaConf.load(CONF_MODEL / "unilm_tiny.yaml")
    assert cfg.family == "encoder"
    model = instantiate(cfg.backbone, vocab_size=VOCAB).eval()
    assert isinstance(model, UnilmEncoder) and model.mode == "bidirectional" and not model.is_causal
    ids, mask, types = batch()
    hf = model.to_hf()  # a BERT's weights
    with torch.no_grad():
        torch.testing.assert_close(
            model(ids, mask, types).last_hidden_state,
            hf(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state,
            atol=1e-5,
            rtol=0,
        )
    causal_default = instantiate(cfg.backbone, vocab_size=VOCAB, mode="left_to_right").eval()
    causal_default.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(
            causal_default(ids).last_hidden_state, model(ids, mode="left_to_right").last_hidden_state
        )
    with pytest.raises(ConfigError, match="model.backbone.mode='both'"):
        tiny(mode="both")
    with pytest.raises(ConfigError, match="mode='both'"):
        model(ids, mode="both")

"""ALBERT options: parity with Hugging Face AlbertModel (sharing=all), factorised embedding and
sharing parameter counts, every sharing mode runs, the configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from transformers import AlbertConfig, AlbertModel

from lightning_modules.models.albert import AlbertEncoder
from lightning_modules.models.transformer import TransformerEncoder
from ptmlab.errors import ConfigError

VOCAB = 60
CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"


def tiny(**kw):
    args = dict(
        vocab_size=VOCAB,
        embedding_size=8,
        hidden_size=32,
        num_layers=3,
        num_heads=4,
        intermediate_size=48,
        max_position_embeddings=24,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return AlbertEncoder(**{**args, **kw}).eval()


def padded_batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, VOCAB, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    return ids, mask, types


def test_parity_with_hf_albert_model_in_both_directions():
    torch.manual_seed(0)
    ours = tiny()
    with torch.no_grad():  # non-trivial LayerNorms and biases, so a mapping slip shows
        for p in ours.parameters():
            p.add_(0.05 * torch.randn_like(p))
    theirs = ours.to_hf()
    ids, mask, types = padded_batch()
    with torch.no_grad():
        mine = ours(ids, attention_mask=mask, token_type_ids=types, output_attentions=True)
        ref = theirs(
            input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True, output_attentions=True
        )
    assert len(ref.hidden_states) == len(mine.hidden_states) == 4
    for a, b in zip(mine.hidden_states, ref.hidden_states):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    for a, b in zip(mine.attentions, ref.attentions):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    back = AlbertEncoder.from_hf(theirs).eval()
    with torch.no_grad():
        torch.testing.assert_close(back(ids, mask, types).last_hidden_state, mine.last_hidden_state)
    grouped = AlbertModel(
        AlbertConfig(
            vocab_size=VOCAB,
            embedding_size=8,
            hidden_size=32,
            num_hidden_layers=2,
            num_hidden_groups=2,
            num_attention_heads=4,
            intermediate_size=48,
        )
    )
    with pytest.raises(Exception, match="num_hidden_groups=2"):
        AlbertEncoder.from_hf(grouped)


def test_factorised_embeddings_and_sharing_parameter_counts():
    bert = TransformerEncoder(
        vocab_size=VOCAB, hidden_size=32, num_layers=3, num_heads=4, intermediate_size=48, max_position_embeddings=24
    )
    per_layer = sum(p.numel() for p in bert.stack.layers[0].parameters())
    attention = sum(p.numel() for p in bert.stack.layers[0].attention.parameters())
    ffn = sum(p.numel() for p in bert.stack.layers[0].feed_forward.parameters())
    count = {
        mode: sum(p.numel() for p in tiny(sharing=mode).parameters()) for mode in ("all", "attention", "ffn", "none")
    }
    assert count["none"] - count["all"] == 2 * per_layer
    assert count["none"] - count["attention"] == 2 * attention
    assert count["none"] - count["ffn"] == 2 * ffn
    # V×E + E×H (+ bias) instead of V×H; positions and token types are E-wide too.
    emb = tiny().embeddings
    assert emb.word_embeddings.weight.shape == (VOCAB, 8) and emb.projection.weight.shape == (32, 8)
    assert emb.position_embeddings.weight.shape == (24, 8)
    assert tiny().get_input_embeddings().weight.shape == (VOCAB, 8)


@pytest.mark.parametrize("sharing", ["attention", "ffn", "none"])
def test_partial_sharing_runs_and_shares_what_it_says(sharing):
    model = tiny(sharing=sharing)
    layers = model.stack.layers
    assert (layers[0].attention is layers[2].attention) == (sharing == "attention")
    assert (layers[0].feed_forward is layers[2].feed_forward) == (sharing == "ffn")
    assert layers[0].attention_norm is not layers[1].attention_norm
    assert model.to_hf() is None  # no Hugging Face counterpart
    ids, mask, types = padded_batch()
    out = model(ids, mask, types)
    assert len(out.hidden_states) == 4 and out.last_hidden_state.shape == (3, 11, 32)
    copy = tiny(sharing=sharing)
    copy.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(copy(ids, mask, types).last_hidden_state, out.last_hidden_state)


def test_configs_and_bad_values():
    for name in ("albert_tiny", "albert_base"):
        cfg = OmegaConf.load(CONF_MODEL / f"{name}.yaml")
        assert cfg.family == "encoder" and cfg.backbone.sharing == "all"
    model = instantiate(OmegaConf.load(CONF_MODEL / "albert_tiny.yaml").backbone, vocab_size=VOCAB)
    assert isinstance(model, AlbertEncoder) and model.family == "encoder" and model.to_hf() is not None
    with pytest.raises(ConfigError, match="model.backbone.sharing='layers'"):
        tiny(sharing="layers")
    with pytest.raises(ConfigError, match="embedding_size"):
        tiny(embedding_size=0)

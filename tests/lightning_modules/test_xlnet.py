"""XLNet-style permutation LM: the masks are those of a permutation, the query stream never sees
its own token (nor anything later in the order), partial prediction picks exactly ceil(T/K)
targets at the end of the order, and without masks the backbone is a plain BERT encoder."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lightning_modules.models.transformer import TransformerEncoder
from lightning_modules.models.xlnet import XLNetEncoder, num_targets, permutation_masks
from ptmlab.errors import ConfigError

VOCAB = 40
CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("seq_len, fraction", [(12, 1 / 6), (13, 1 / 6), (7, 1 / 7), (50, 1 / 7), (5, 0.5)])
def test_masks_are_those_of_a_permutation(seq_len, fraction):
    m = permutation_masks(seq_len, gen(seq_len), fraction, batch_size=8)
    expected_targets = math.ceil(seq_len * fraction - 1e-9)
    assert num_targets(seq_len, fraction) == expected_targets
    lower = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
    for b in range(8):
        order = m.order[b]
        assert sorted(order.tolist()) == list(range(seq_len))
        assert torch.equal(m.rank[b][order], torch.arange(seq_len))
        # Read in the order, the content mask is lower-triangular with its diagonal, the query
        # mask strictly lower-triangular.
        assert torch.equal(m.content_mask[b][order][:, order], lower)
        assert torch.equal(m.query_mask[b][order][:, order], lower.tril(-1))
        assert not m.query_mask[b].diagonal().any() and m.content_mask[b].diagonal().all()
        assert int(m.target_mask[b].sum()) == expected_targets
        assert set(order[seq_len - expected_targets:].tolist()) == set(m.target_mask[b].nonzero().flatten().tolist())
    # Seeded: the same generator state gives the same order, another seed another one.
    assert torch.equal(permutation_masks(seq_len, gen(seq_len), fraction, batch_size=8).order, m.order)
    assert not torch.equal(permutation_masks(seq_len, gen(seq_len + 1), fraction, batch_size=8).order, m.order)


def test_orders_are_uniform_over_positions():
    """Each position is equally likely at each step (a uniform random permutation)."""
    m = permutation_masks(6, gen(1), 1 / 3, batch_size=6000)
    counts = torch.zeros(6, 6)
    counts.index_put_((m.order.flatten(), torch.arange(6).repeat(6000)), torch.ones(36000), accumulate=True)
    assert (counts / 1000 - 1).abs().max() < 0.15  # 1000 expected per cell; 4.7 sigma
    assert m.target_mask.float().mean(0).sub(1 / 3).abs().max() < 0.05  # every position a target 1/3 of the time


def test_padding_is_last_in_the_order_and_never_a_target():
    attention_mask = torch.tensor([[1] * 10, [1] * 6 + [0] * 4, [1] * 2 + [0] * 8])
    m = permutation_masks(0, gen(2), 1 / 3, attention_mask=attention_mask)
    assert m.content_mask.shape == (3, 10, 10)
    assert m.target_mask.sum(1).tolist() == [4, 2, 1]  # ceil(10/3), ceil(6/3), capped at L-1
    assert not (m.target_mask & ~attention_mask.bool()).any()
    real = attention_mask.bool()
    for b in range(3):
        assert not m.content_mask[b][real[b]][:, ~real[b]].any()  # real tokens never see padding
    with pytest.raises(ConfigError, match="predict_fraction=1"):
        permutation_masks(8, gen(), 1.0)


def tiny(**kw):
    args = dict(vocab_size=VOCAB, hidden_size=32, num_layers=3, num_heads=4, intermediate_size=48,
                max_position_embeddings=24, dropout=0.0, attention_dropout=0.0)
    return XLNetEncoder(**{**args, **kw}).eval()


def test_two_streams_never_leak_what_they_predict():
    torch.manual_seed(0)
    model = tiny()
    seq_len = 9
    ids = torch.randint(1, VOCAB, (1, seq_len), generator=gen(3))
    m = permutation_masks(seq_len, gen(4), 1 / 3)
    order = m.order[0].tolist()
    with torch.no_grad():
        ref = model(ids, content_mask=m.content_mask, query_mask=m.query_mask, output_attentions=True)
        assert len(ref.query_hidden_states) == len(ref.hidden_states) == 4
        for step in range(1, seq_len):
            i = order[step]
            for j, should_change in ((i, False), (order[step - 1], True)):
                changed = ids.clone()
                changed[0, j] = (changed[0, j] + 1) % VOCAB
                out = model(changed, content_mask=m.content_mask, query_mask=m.query_mask)
                g_changed = not torch.allclose(out.query_hidden_states[-1][0, i], ref.query_hidden_states[-1][0, i])
                assert g_changed == should_change, (step, i, j)
            # Nothing later in the order reaches position i in either stream.
            if step + 1 < seq_len:
                later = ids.clone()
                later[0, order[step + 1:]] = (later[0, order[step + 1:]] + 1) % VOCAB
                out = model(later, content_mask=m.content_mask, query_mask=m.query_mask)
                torch.testing.assert_close(out.query_hidden_states[-1][0, i], ref.query_hidden_states[-1][0, i])
                torch.testing.assert_close(out.hidden_states[-1][0, i], ref.hidden_states[-1][0, i])
    assert ref.attentions[0][0][:, ~m.content_mask[0]].abs().max() == 0


def test_without_masks_it_is_a_bert_encoder_and_gradients_reach_w():
    model = tiny()
    bert = TransformerEncoder(vocab_size=VOCAB, hidden_size=32, num_layers=3, num_heads=4, intermediate_size=48,
                              max_position_embeddings=24, dropout=0.0, attention_dropout=0.0).eval()
    missing = bert.load_state_dict({k: v for k, v in model.state_dict().items() if k != "mask_embedding"})
    assert not missing.missing_keys and not missing.unexpected_keys
    ids = torch.randint(1, VOCAB, (2, 8), generator=gen(5))
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    with torch.no_grad():
        torch.testing.assert_close(model(ids, mask).last_hidden_state, bert(ids, mask).last_hidden_state)
    assert model(ids).query_hidden_states is None
    m = permutation_masks(0, gen(6), 0.25, attention_mask=mask)
    out = model.train()(ids, mask, content_mask=m.content_mask, query_mask=m.query_mask)
    out.query_hidden_states[-1][m.target_mask].sum().backward()
    assert model.mask_embedding.grad is not None and model.mask_embedding.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="content_mask"):
        model(ids, query_mask=m.query_mask)


def test_configs():
    for name in ("xlnet_tiny", "xlnet_base"):
        cfg = OmegaConf.load(CONF_MODEL / f"{name}.yaml")
        assert cfg.family == "permutation" and cfg.name == name
    model = instantiate(OmegaConf.load(CONF_MODEL / "xlnet_tiny.yaml").backbone, vocab_size=VOCAB)
    assert isinstance(model, XLNetEncoder) and model.family == "permutation" and model.to_hf() is None

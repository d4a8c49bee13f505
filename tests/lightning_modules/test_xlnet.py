"""XLNet permutation LM: the masks are those of a permutation, the query stream never sees its
own token (nor anything later in the order), partial prediction picks exactly ceil(T/K) targets
at the end of the order, and both streams match Hugging Face XLNetModel layer by layer, with our
weights exported (`to_hf`) and with a randomly initialised XLNetModel's weights imported
(`from_hf`)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lightning_modules.models.xlnet import XLNetEncoder, num_targets, permutation_masks
from ptmlab.errors import BackboneError, ConfigError

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
        assert set(order[seq_len - expected_targets :].tolist()) == set(m.target_mask[b].nonzero().flatten().tolist())
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
    args = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=3,
        num_heads=4,
        intermediate_size=48,
        dropout=0.0,
        attention_dropout=0.0,
    )
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
                later[0, order[step + 1 :]] = (later[0, order[step + 1 :]] + 1) % VOCAB
                out = model(later, content_mask=m.content_mask, query_mask=m.query_mask)
                torch.testing.assert_close(out.query_hidden_states[-1][0, i], ref.query_hidden_states[-1][0, i])
                torch.testing.assert_close(out.hidden_states[-1][0, i], ref.hidden_states[-1][0, i])
    assert ref.attentions[0][0][:, ~m.content_mask[0]].abs().max() == 0


def _batch():
    ids = torch.randint(1, VOCAB, (3, 10), generator=gen(5))
    mask = torch.tensor([[1] * 10, [1] * 7 + [0] * 3, [1] * 4 + [0] * 6])
    segments = torch.tensor([[0] * 4 + [1] * 6, [0] * 3 + [1] * 7, [0] * 10])
    return ids, mask, segments


def _max_diffs(ours, theirs):
    return [float((a - b).abs().max()) for a, b in zip(ours, theirs, strict=True)]


def _random_hf_xlnet(seed, head=False, **overrides):
    """A tiny randomly initialised XLNetModel (XLNetLMHeadModel with `head`). Hugging Face starts
    LayerNorms at 1 / 0 and Linear biases at 0; they are randomised too, and initializer_range is
    0.1 rather than 0.02, so that a weight loaded under the wrong name (r_w_bias for r_r_bias, say)
    moves the outputs by far more than the tolerance (~4e-2 instead of ~6e-5)."""
    from transformers import XLNetConfig, XLNetLMHeadModel, XLNetModel

    config = XLNetConfig(
        **{
            **dict(
                vocab_size=100,
                d_model=32,
                n_layer=2,
                n_head=2,
                d_inner=64,
                dropout=0.0,
                ff_activation="gelu",
                attn_type="bi",
                bi_data=False,
                clamp_len=-1,
                mem_len=None,
                initializer_range=0.1,
            ),
            **overrides,
        }
    )
    torch.manual_seed(seed)
    model = (XLNetLMHeadModel if head else XLNetModel)(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "layer_norm" in name or name.endswith(".bias"):
                param.normal_(1.0 if name.endswith("layer_norm.weight") else 0.0, 0.1)
    return model.eval()


def _exported(seed):
    torch.manual_seed(seed)
    model = tiny()
    return model, model.to_hf()


def _imported(seed):
    hf = _random_hf_xlnet(seed)
    return XLNetEncoder.from_hf(hf).eval(), hf


PAIRS = {"to_hf": _exported, "from_hf": _imported}


@pytest.mark.parametrize("direction", PAIRS)
def test_content_stream_matches_hf_xlnet_model(direction):
    """Every layer's hidden states and attentions, with padding and two segments (and without
    either), against XLNetModel holding the same weights."""
    model, hf = PAIRS[direction](0)
    ids, mask, segments = _batch()
    with torch.no_grad():
        for kwargs in ({"attention_mask": mask, "token_type_ids": segments}, {}):
            ours = model(ids, output_attentions=True, **kwargs)
            theirs = hf(ids, output_hidden_states=True, output_attentions=True, **kwargs)
            assert ours.query_hidden_states is None
            assert len(ours.hidden_states) == len(theirs.hidden_states) == hf.config.n_layer + 1
            assert max(_max_diffs(ours.hidden_states, theirs.hidden_states)) < 1e-5
            assert max(_max_diffs(ours.attentions, theirs.attentions)) < 1e-5


@pytest.mark.parametrize("direction", PAIRS)
def test_query_stream_matches_hf_xlnet_model(direction):
    """The two-stream forward of a permutation LM step: our B×T×T "may attend" masks are
    XLNetModel's perm_mask (1 = may not attend) and target_mapping picks the targets."""
    model, hf = PAIRS[direction](1)
    ids, mask, segments = _batch()
    m = permutation_masks(0, gen(7), 1 / 3, attention_mask=mask)
    targets = m.target_mask.nonzero()  # N×2 (row, position)
    per_row = int(m.target_mask.sum(1).max())
    mapping = torch.zeros(3, per_row, 10)  # B×targets×T, one-hot rows; unused slots stay zero
    slots = {}
    for b, i in targets.tolist():
        slots.setdefault(b, []).append(i)
        mapping[b, len(slots[b]) - 1, i] = 1.0
    with torch.no_grad():
        ours = model(ids, mask, segments, content_mask=m.content_mask, query_mask=m.query_mask)
        theirs = hf(
            ids,
            attention_mask=mask,
            token_type_ids=segments,
            perm_mask=(~m.query_mask).float(),
            target_mapping=mapping,
            output_hidden_states=True,
        )
    h_theirs, g_theirs = theirs.hidden_states[0::2], theirs.hidden_states[1::2]  # (h0, g0, h1, g1, ...)
    assert len(ours.query_hidden_states) == len(g_theirs) == hf.config.n_layer + 1
    real = mask.bool()
    for layer, (h_ours, h_ref) in enumerate(zip(ours.hidden_states, h_theirs, strict=True)):
        assert float((h_ours - h_ref)[real].abs().max()) < 1e-5, layer
    for layer, (g_ours, g_ref) in enumerate(zip(ours.query_hidden_states, g_theirs, strict=True)):
        for b, positions in slots.items():
            diff = (g_ours[b, positions] - g_ref[b, : len(positions)]).abs().max().item()
            assert float(diff) < 1e-5, (layer, b)
    # last_hidden_state is the query stream at the targets (dropout is off).
    for b, positions in slots.items():
        torch.testing.assert_close(theirs.last_hidden_state[b, : len(positions)], g_theirs[-1][b, : len(positions)])
    assert targets.shape[0] == 4 + 3 + 2  # ceil(10/3), ceil(7/3), ceil(4/3): the targets compared


def test_hf_conversion_round_trips_and_refuses_what_it_cannot_compute():
    hf = _random_hf_xlnet(2, head=True)  # the LM head model: its body converts, its head is ignored
    model = XLNetEncoder.from_hf(hf)
    assert (model.hidden_size, model.num_layers, model.num_heads, model.intermediate_size) == (32, 2, 2, 64)
    back = model.to_hf().state_dict()
    body = hf.transformer.state_dict()
    assert back.keys() == body.keys()
    for name, tensor in body.items():
        assert torch.equal(back[name], tensor), name
    for overrides, key in (
        ({"attn_type": "uni"}, "attn_type"),
        ({"bi_data": True}, "bi_data"),
        ({"clamp_len": 4}, "clamp_len"),
    ):
        with pytest.raises(BackboneError, match=key):
            XLNetEncoder.from_hf(_random_hf_xlnet(2, **overrides))


def test_feed_forward_drops_out_where_xlnet_does():
    """In training too: the same random stream gives XLNetFeedForward's output (dropout after the
    activation and after the output, then the residual LayerNorm)."""
    from transformers.models.xlnet.modeling_xlnet import XLNetFeedForward

    hf = _random_hf_xlnet(3, dropout=0.3)
    layer = XLNetEncoder.from_hf(hf).layers[0].train()
    theirs_ff = XLNetFeedForward(hf.config).train()
    theirs_ff.load_state_dict(hf.layer[0].ff.state_dict())
    x = torch.randn(3, 10, 32, generator=gen(9))
    torch.manual_seed(4)
    theirs = theirs_ff(x)
    torch.manual_seed(4)
    ours = layer.feed_forward_norm(x + layer.feed_forward(x))
    torch.testing.assert_close(ours, theirs)
    assert not torch.allclose(ours, layer.eval().feed_forward_norm(x + layer.feed_forward(x)))  # dropout did act


def test_gradients_reach_w_and_masks_are_checked():
    model = tiny()
    ids, mask, _ = _batch()
    assert model(ids).query_hidden_states is None
    m = permutation_masks(0, gen(6), 0.25, attention_mask=mask)
    out = model.train()(ids, mask, content_mask=m.content_mask, query_mask=m.query_mask)
    # A random projection: the plain sum of a LayerNorm output (weights 1) has zero gradient.
    query = out.query_hidden_states[-1][m.target_mask]
    (query * torch.randn(query.shape, generator=gen(8))).sum().backward()
    w = model.embeddings.mask_embedding
    assert w.grad is not None and w.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="content_mask"):
        model(ids, query_mask=m.query_mask)
    with pytest.raises(ConfigError, match="divisible"):
        tiny(num_heads=5)


def test_configs():
    for name in ("xlnet_tiny", "xlnet_base"):
        cfg = OmegaConf.load(CONF_MODEL / f"{name}.yaml")
        assert cfg.family == "permutation" and cfg.name == name
    model = instantiate(OmegaConf.load(CONF_MODEL / "xlnet_tiny.yaml").backbone, vocab_size=VOCAB)
    assert isinstance(model, XLNetEncoder) and model.family == "permutation"
    assert type(model.to_hf()).__name__ == "XLNetModel"

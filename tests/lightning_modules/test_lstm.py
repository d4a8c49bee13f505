"""ELMo-style biLSTM: a hand-checked numeric example (HF has no counterpart), the direction
property the bidirectional LM objective relies on, padding, layer shapes, the config."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lightning_modules.models.lstm import BidirectionalLSTMLM, reverse_within_length
from ptmlab.errors import ConfigError

CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_lstm(xs, w_ih, w_hh, b):
    """The LSTM equations written out, gates in PyTorch's order (input, forget, cell, output)."""
    hidden = w_hh.shape[1]
    h, c = np.zeros(hidden), np.zeros(hidden)
    outputs = []
    for x in xs:
        z = w_ih @ x + w_hh @ h + b
        i, f, g, o = (
            sigmoid(z[:hidden]),
            sigmoid(z[hidden : 2 * hidden]),
            np.tanh(z[2 * hidden : 3 * hidden]),
            sigmoid(z[3 * hidden :]),
        )
        c = f * c + i * g
        h = o * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs)


def hand_set_model():
    """1 layer, E = D = 2, vocabulary of 4, every weight written by hand."""
    model = BidirectionalLSTMLM(vocab_size=4, embedding_size=2, hidden_size=2, num_layers=1, dropout=0.0).eval()
    emb = np.array([[0.0, 0.0], [1.0, -0.5], [0.25, 0.75], [-1.0, 0.5]])
    fwd = dict(
        w_ih=np.arange(16).reshape(8, 2) / 10.0 - 0.7,
        w_hh=np.linspace(-0.4, 0.4, 16).reshape(8, 2),
        b=np.array([0.1, -0.1, 0.2, 0.0, 0.3, -0.2, 0.05, 0.15]),
    )
    bwd = dict(
        w_ih=np.cos(np.arange(16)).reshape(8, 2) * 0.6,
        w_hh=np.sin(np.arange(16)).reshape(8, 2) * 0.3,
        b=np.linspace(0.2, -0.2, 8),
    )
    with torch.no_grad():
        model.word_embeddings.weight.copy_(torch.tensor(emb))
        for stack, p in ((model.forward_lstm, fwd), (model.backward_lstm, bwd)):
            lstm = stack.layers[0]
            lstm.weight_ih_l0.copy_(torch.tensor(p["w_ih"]))
            lstm.weight_hh_l0.copy_(torch.tensor(p["w_hh"]))
            lstm.bias_ih_l0.copy_(torch.tensor(p["b"]))
            lstm.bias_hh_l0.zero_()
    return model, emb, fwd, bwd


def test_hand_checked_one_layer_example_with_padding():
    model, emb, fwd, bwd = hand_set_model()
    input_ids = torch.tensor([[1, 2, 3, 1], [3, 2, 0, 0]])
    attention_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    with torch.no_grad():
        out = model(input_ids, attention_mask=attention_mask)
    assert len(out.hidden_states) == 2 and all(h.shape == (2, 4, 4) for h in out.hidden_states)
    for row, length in ((0, 4), (1, 2)):
        xs = emb[input_ids[row, :length].numpy()]
        expected_f = numpy_lstm(xs, **fwd)
        expected_b = numpy_lstm(xs[::-1], **bwd)[::-1]
        np.testing.assert_allclose(out.hidden_states[0][row, :length].numpy(), np.concatenate([xs, xs], 1), atol=1e-6)
        np.testing.assert_allclose(
            out.hidden_states[1][row, :length].numpy(), np.concatenate([expected_f, expected_b], 1), atol=1e-6
        )
        np.testing.assert_allclose(out.forward_states[1][row, :length].numpy(), expected_f, atol=1e-6)
        np.testing.assert_allclose(out.backward_states[1][row, :length].numpy(), expected_b, atol=1e-6)
    # A worked value: the first forward step of row 0 by hand, h = o·tanh(i·g).
    z = fwd["w_ih"] @ emb[1] + fwd["b"]
    h0 = sigmoid(z[6:]) * np.tanh(sigmoid(z[:2]) * np.tanh(z[4:6]))
    np.testing.assert_allclose(out.forward_states[1][0, 0].numpy(), h0, atol=1e-6)


def test_directions_never_see_the_token_they_predict():
    """Forward state at t depends on tokens <= t only; backward state at t on tokens >= t only."""
    torch.manual_seed(0)
    model = BidirectionalLSTMLM(
        vocab_size=30, embedding_size=8, hidden_size=12, projection_size=6, num_layers=3, dropout=0.0
    ).eval()
    x = torch.randint(1, 30, (2, 9))
    t = 4
    later, earlier = x.clone(), x.clone()
    later[:, t + 1 :] = (later[:, t + 1 :] + 7) % 30
    earlier[:, :t] = (earlier[:, :t] + 7) % 30
    with torch.no_grad():
        ref, a, b = model(x), model(later), model(earlier)
    for layer in range(1, 4):
        torch.testing.assert_close(ref.forward_states[layer][:, : t + 1], a.forward_states[layer][:, : t + 1])
        assert not torch.allclose(ref.forward_states[layer][:, t + 1 :], a.forward_states[layer][:, t + 1 :])
        torch.testing.assert_close(ref.backward_states[layer][:, t:], b.backward_states[layer][:, t:])
        assert not torch.allclose(ref.backward_states[layer][:, :t], b.backward_states[layer][:, :t])
    # LSTMP: per-direction width is the projection; the embedding is projected to it.
    assert model.hidden_size == 12 and all(h.shape == (2, 9, 12) for h in ref.hidden_states)
    assert len(ref.hidden_states) == 4 and model.embedding_projection is not None


def test_padding_does_not_change_real_positions_and_left_padding_is_refused():
    torch.manual_seed(1)
    model = BidirectionalLSTMLM(vocab_size=20, embedding_size=6, hidden_size=6, num_layers=2, dropout=0.0).eval()
    x = torch.randint(1, 20, (1, 5))
    padded = torch.cat([x, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    mask = torch.tensor([[1] * 5 + [0] * 3])
    with torch.no_grad():
        ref, out = model(x), model(padded, attention_mask=mask)
        for r, h in zip(ref.hidden_states, out.hidden_states):
            torch.testing.assert_close(h[:, :5], r)
        with pytest.raises(ValueError, match="right padding"):
            model(padded.flip(1), attention_mask=mask.flip(1))
    seq = torch.arange(12.0).view(2, 6, 1)
    lengths = torch.tensor([6, 3])
    rev = reverse_within_length(seq, lengths)
    assert rev[1, :, 0].tolist() == [8.0, 7.0, 6.0, 9.0, 10.0, 11.0]
    assert torch.equal(reverse_within_length(rev, lengths), seq)


def test_residual_connections_and_config():
    cfg = OmegaConf.load(CONF_MODEL / "elmo_tiny.yaml")
    assert cfg.family == "lstm"
    model = instantiate(cfg.backbone, vocab_size=40)
    assert model.family == "lstm" and model.vocab_size == 40 and model.get_input_embeddings().weight.shape[0] == 40
    out = model(torch.randint(0, 40, (2, 7)))
    assert len(out.hidden_states) == model.num_layers + 1
    assert all(h.shape == (2, 7, model.hidden_size) for h in out.hidden_states)
    out.last_hidden_state.sum().backward()
    assert model.word_embeddings.weight.grad is not None
    with pytest.raises(ConfigError, match="projection_size"):
        BidirectionalLSTMLM(vocab_size=10, hidden_size=8, projection_size=8)
    with pytest.raises(ConfigError, match="num_layers"):
        BidirectionalLSTMLM(vocab_size=10, num_layers=0)

"""Parity with Hugging Face: random-init tiny BertModel / GPT2Model, weights loaded into ours,
every layer's hidden states and attention maps equal to 1e-5 on a padded batch."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.models.transformer import TransformerDecoder, TransformerEncoder

transformers = pytest.importorskip("transformers")

VOCAB, HIDDEN, LAYERS, HEADS, FFN = 97, 32, 3, 4, 64
ATOL = 1e-5


def padded_batch(seed: int = 0, with_types: bool = False):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, VOCAB, (3, 11), generator=g)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = 0  # right padding of different lengths in one batch
    attention_mask[2, 4:] = 0
    input_ids = input_ids.masked_fill(attention_mask == 0, 0)
    token_type_ids = None
    if with_types:
        token_type_ids = torch.zeros_like(input_ids)
        token_type_ids[:, 5:] = 1
    return input_ids, attention_mask, token_type_ids


def assert_layers_close(ours, theirs, attention_mask, what):
    assert len(ours) == len(theirs), what
    real = attention_mask.bool()
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == b.shape, f"{what}[{i}] shape {a.shape} vs {b.shape}"
        # Real positions must match; padded positions too, since both apply the same mask.
        torch.testing.assert_close(a[real], b[real], atol=ATOL, rtol=0, msg=f"{what}[{i}] (real tokens)")
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0, msg=f"{what}[{i}] (all positions)")


def bert_model():
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
        max_position_embeddings=64,
        type_vocab_size=2,
        hidden_act="gelu",
        layer_norm_eps=1e-12,
        attn_implementation="eager",
    )
    model = transformers.BertModel(config).eval()
    with torch.no_grad():  # LayerNorms start at (1, 0): perturb them so the mapping is really tested
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


def gpt2_model():
    torch.manual_seed(1)
    config = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_embd=HIDDEN,
        n_layer=LAYERS,
        n_head=HEADS,
        n_inner=FFN,
        n_positions=64,
        activation_function="gelu_new",
        layer_norm_epsilon=1e-5,
        bos_token_id=None,
        eos_token_id=None,
        attn_implementation="eager",
    )
    model = transformers.GPT2Model(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name or name.startswith("ln_f") or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def test_bert_parity_hidden_states_and_attentions():
    hf = bert_model()
    ours = TransformerEncoder.from_hf(hf).eval()
    input_ids, attention_mask, token_type_ids = padded_batch(with_types=True)
    with torch.no_grad():
        ref = hf(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            output_hidden_states=True,
            output_attentions=True,
        )
        out = ours(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, output_attentions=True)
        fast = ours(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)  # SDPA path
    assert len(out.hidden_states) == LAYERS + 1 and out.hidden_states[0].shape == (3, 11, HIDDEN)
    assert_layers_close(out.hidden_states, ref.hidden_states, attention_mask, "hidden_states")
    assert_layers_close(fast.hidden_states, ref.hidden_states, attention_mask, "hidden_states (sdpa)")
    assert fast.attentions is None
    assert len(out.attentions) == LAYERS and out.attentions[0].shape == (3, HEADS, 11, 11)
    for i, (a, b) in enumerate(zip(out.attentions, ref.attentions)):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0, msg=f"attentions[{i}]")
    # Padding keys get no attention at all.
    assert out.attentions[0][2, :, :, 4:].abs().max() < 1e-6


def test_gpt2_parity_hidden_states_and_attentions():
    hf = gpt2_model()
    ours = TransformerDecoder.from_hf(hf).eval()
    input_ids, attention_mask, _ = padded_batch(seed=1)
    with torch.no_grad():
        ref = hf(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, output_attentions=True)
        out = ours(input_ids, attention_mask=attention_mask, output_attentions=True)
        fast = ours(input_ids, attention_mask=attention_mask)
        unpadded_ref = hf(input_ids=input_ids[:1], output_hidden_states=True)
        unpadded = ours(input_ids[:1])  # no mask at all: SDPA's own causal kernel
    assert_layers_close(out.hidden_states, ref.hidden_states, attention_mask, "hidden_states")
    assert_layers_close(fast.hidden_states, ref.hidden_states, attention_mask, "hidden_states (sdpa)")
    assert_layers_close(unpadded.hidden_states, unpadded_ref.hidden_states, attention_mask[:1], "unpadded")
    for i, (a, b) in enumerate(zip(out.attentions, ref.attentions)):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0, msg=f"attentions[{i}]")
    # Causal: nothing above the diagonal.
    assert torch.triu(out.attentions[-1][0], diagonal=1).abs().max() < 1e-6


def test_round_trip_to_hf_gives_the_same_model():
    enc = TransformerEncoder(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_layers=2,
        num_heads=HEADS,
        intermediate_size=FFN,
        max_position_embeddings=64,
    ).eval()
    dec = TransformerDecoder(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_layers=2,
        num_heads=HEADS,
        intermediate_size=FFN,
        max_position_embeddings=64,
    ).eval()
    input_ids, attention_mask, _ = padded_batch(seed=2)
    for ours, hf_class in ((enc, transformers.BertModel), (dec, transformers.GPT2Model)):
        hf = ours.to_hf()
        assert isinstance(hf, hf_class)
        with torch.no_grad():
            a = ours(input_ids, attention_mask=attention_mask).hidden_states
            b = hf(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True).hidden_states
        assert_layers_close(a, b, attention_mask, type(ours).__name__)
    # No Hugging Face counterpart: a pre-LN encoder, a post-LN decoder.
    assert (
        TransformerEncoder(vocab_size=VOCAB, hidden_size=HIDDEN, num_heads=HEADS, pre_layer_norm=True).to_hf() is None
    )
    assert (
        TransformerDecoder(vocab_size=VOCAB, hidden_size=HIDDEN, num_heads=HEADS, pre_layer_norm=False).to_hf() is None
    )

"""T5 variant of the encoder–decoder: parity with Hugging Face T5Model (relative position buckets,
RMSNorm, unscaled bias-free attention) with padding on both sides; the bucket function."""

from __future__ import annotations

from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lightning_modules.models.t5 import T5EncoderDecoder, relative_position_bucket

VOCAB = 50
CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"


def test_parity_with_hf_t5_model_with_padding():
    torch.manual_seed(0)
    ours = T5EncoderDecoder(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=2,
        num_decoder_layers=3,
        num_heads=4,
        intermediate_size=48,
        dropout=0.0,
    ).eval()
    with torch.no_grad():  # non-trivial norms and position biases, so a mapping slip shows
        for p in ours.parameters():
            p.add_(0.1 * torch.randn_like(p))
    theirs = ours.to_hf()
    g = torch.Generator().manual_seed(1)
    src = torch.randint(2, VOCAB, (3, 40), generator=g)  # long enough for logarithmic buckets
    src_mask = torch.ones_like(src)
    src_mask[1, 30:] = 0
    src_mask[2, 9:] = 0
    tgt = torch.randint(2, VOCAB, (3, 20), generator=g)
    tgt_mask = torch.ones_like(tgt)
    tgt_mask[0, 15:] = 0
    with torch.no_grad():
        mine = ours(src, src_mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask)
        ref = theirs(
            input_ids=src,
            attention_mask=src_mask,
            decoder_input_ids=tgt,
            decoder_attention_mask=tgt_mask,
            output_hidden_states=True,
        )
    assert len(mine.hidden_states) == len(ref.encoder_hidden_states) == 3
    for a, b in zip(mine.hidden_states, ref.encoder_hidden_states):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    for a, b in zip(mine.decoder_hidden_states, ref.decoder_hidden_states):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    back = T5EncoderDecoder.from_hf(theirs).eval()
    with torch.no_grad():
        again = back(src, src_mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask)
    torch.testing.assert_close(again.decoder_last_hidden_state, mine.decoder_last_hidden_state)


def test_relative_position_buckets():
    relative = torch.arange(-200, 201)
    bi = relative_position_bucket(relative, True, 32, 128)
    causal = relative_position_bucket(relative, False, 32, 128)
    assert bi.min() == 0 and bi.max() == 31 and causal.min() == 0 and causal.max() == 31
    assert bi[200] == 0 and bi[201] == 17 and bi[199] == 1  # the query itself; one key after (upper half); one before
    assert (causal[201:] == 0).all()  # causal: every later key falls in bucket 0 (it is masked anyway)
    assert bi[:200].diff().le(0).all() and causal[:200].diff().le(0).all()  # monotone in distance


def test_config():
    cfg = OmegaConf.load(CONF_MODEL / "t5_tiny.yaml")
    model = instantiate(cfg.backbone, vocab_size=VOCAB).eval()
    assert isinstance(model, T5EncoderDecoder) and cfg.family == model.family == "encoder_decoder"
    ids = torch.randint(0, VOCAB, (2, 7))
    out = model(ids, decoder_input_ids=ids)
    assert out.decoder_last_hidden_state.shape == (2, 7, 128) and len(out.hidden_states) == 3

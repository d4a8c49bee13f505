"""CausalLMObjective: next-token labels with padding, refusing a non-causal backbone, tying, and a
tiny TransformerDecoder overfitting one batch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lightning_modules.models.transformer import TransformerDecoder, TransformerEncoder
from lightning_modules.objectives.clm import CausalLMObjective, next_token_labels
from lightning_modules.objectives.masking import IGNORE_INDEX
from ptmlab.errors import ConfigError

PAD, VOCAB = 0, 60


def decoder(dropout: float = 0.1) -> TransformerDecoder:
    return TransformerDecoder(
        vocab_size=VOCAB,
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
        dropout=dropout,
        attention_dropout=dropout,
    )


def padded_batch(rows: int = 8, length: int = 24, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (rows, length), generator=g)
    lengths = torch.randint(length // 2, length + 1, (rows,), generator=g)
    lengths[0] = length
    attention_mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    return {"input_ids": ids.masked_fill(attention_mask == 0, PAD), "attention_mask": attention_mask}


def test_next_token_labels_shift_and_skip_padding():
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, PAD, PAD]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    assert next_token_labels(ids, mask).tolist() == [
        [6, 7, 8, IGNORE_INDEX],
        [10, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX],
    ]
    assert next_token_labels(ids, None).tolist()[1] == [10, PAD, PAD, IGNORE_INDEX]


def test_loss_matches_a_hand_computed_shifted_cross_entropy():
    backbone = decoder().eval()
    objective = CausalLMObjective(backbone, tokenizer=None)
    batch = padded_batch()
    out = objective(batch, backbone)
    with torch.no_grad():
        hidden = backbone(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    logits = hidden @ backbone.get_input_embeddings().weight.T  # B×T×V, the tied output layer
    targets = next_token_labels(batch["input_ids"], batch["attention_mask"])
    expected = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(out.loss.detach(), expected, atol=1e-5, rtol=0)
    assert out.num_predicted_tokens == int((targets != IGNORE_INDEX).sum())
    assert 0.0 <= out.metrics["clm_acc"].item() <= 1.0
    assert list(objective.parameters()) == []  # nothing but the tied embeddings


def test_future_tokens_do_not_change_earlier_predictions():
    backbone = decoder().eval()
    batch = padded_batch(rows=2)
    changed = batch["input_ids"].clone()
    changed[:, 10:] = (changed[:, 10:] + 7) % VOCAB
    with torch.no_grad():
        a = backbone(batch["input_ids"]).last_hidden_state
        b = backbone(changed).last_hidden_state
    torch.testing.assert_close(a[:, :10], b[:, :10])
    assert not torch.allclose(a[:, 10:], b[:, 10:])


def test_refuses_a_bidirectional_backbone():
    encoder = TransformerEncoder(vocab_size=VOCAB, hidden_size=32, num_heads=2)
    with pytest.raises(ConfigError, match=r"objective=clm.*model family 'encoder'"):
        CausalLMObjective(encoder, tokenizer=None)


def test_tiny_decoder_overfits_one_batch():
    torch.manual_seed(0)
    backbone = decoder(dropout=0.0)
    objective = CausalLMObjective(backbone, tokenizer=None)
    batch = padded_batch(rows=8, length=24, seed=3)
    optimizer = torch.optim.AdamW(backbone.parameters(), lr=3e-3, weight_decay=0.0)
    losses = []
    for _ in range(100):
        loss = objective(batch, backbone).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # Random tokens: only memorising the batch brings the loss from ln(60) ≈ 4.1 towards 0.
    assert losses[-1] < 0.1 * losses[0], (losses[0], losses[-1])

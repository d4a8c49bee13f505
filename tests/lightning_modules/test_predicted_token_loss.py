"""The masked-LM and causal-LM losses without a host synchronisation: on an accelerator
`predicted_token_loss` projects every position and weights the ignored ones 0 instead of gathering
the predicted positions (a boolean index, whose size only the device knows). Here the accelerator
path is forced on a CPU and checked against the gathered formula the objectives used before, on
random batches, a batch with nothing to predict and a batch where everything is predicted; on a
GPU (when there is one) the training step runs under `torch.cuda.set_sync_debug_mode("error")`."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lightning_modules.models.transformer import TransformerDecoder, TransformerEncoder
from lightning_modules.objectives import base
from lightning_modules.objectives.base import predicted_token_loss, token_loss
from lightning_modules.objectives.clm import CausalLMObjective
from lightning_modules.objectives.masking import IGNORE_INDEX
from lightning_modules.objectives.mlm import MaskedLMHead, MaskedLMObjective

VOCAB, HIDDEN = 50, 32


class Tok:
    mask_token_id, pad_token_id, cls_token_id, sep_token_id = 4, 0, 2, 3
    all_special_ids = [0, 1, 2, 3, 4]


def gathered_reference(hidden: torch.Tensor, labels: torch.Tensor, project) -> tuple[torch.Tensor, ...]:
    """The objectives' loss before: the V-way projection at the gathered predicted positions."""
    predicted = labels != IGNORE_INDEX
    logits = project(hidden[predicted])  # B×T×H -> N×H -> N×V
    loss, accuracy = token_loss(logits, labels[predicted], hidden)
    return loss, accuracy, int(predicted.sum())


@pytest.fixture
def on_accelerator_path(monkeypatch):
    monkeypatch.setattr(base, "gathers_predicted_positions", lambda device: False)


def random_labels(rows: int, length: int, predicted_fraction: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(0, VOCAB, (rows, length), generator=g)
    chosen = torch.rand(rows, length, generator=g) < predicted_fraction
    return targets.masked_fill(~chosen, IGNORE_INDEX)


@pytest.mark.parametrize("predicted_fraction, seed", [(0.15, 0), (0.15, 1), (0.5, 2), (0.0, 3), (1.0, 4)])
def test_projecting_every_position_gives_the_gathered_loss_accuracy_and_gradients(
    on_accelerator_path, predicted_fraction, seed
):
    torch.manual_seed(seed)
    head = MaskedLMHead(HIDDEN, HIDDEN, VOCAB)
    embedding = torch.randn(VOCAB, HIDDEN, requires_grad=True)
    labels = random_labels(4, 12, predicted_fraction, seed)
    hidden = torch.randn(4, 12, HIDDEN, requires_grad=True)

    def run(compute):
        for t in (hidden, embedding, *head.parameters()):
            t.grad = None
        loss, accuracy, count = compute(hidden, labels, lambda h: head(h, embedding))
        loss.backward()
        return loss.detach(), accuracy, int(count), [t.grad.clone() for t in (hidden, embedding, head.dense.weight)]

    expected = run(gathered_reference)
    got = run(predicted_token_loss)
    assert got[2] == expected[2]
    torch.testing.assert_close(got[0], expected[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[1], expected[1])
    for grad, expected_grad in zip(got[3], expected[3]):
        torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-6)
    if predicted_fraction == 0.0:  # nothing to predict: 0, as before, never 0/0
        assert got[0].item() == 0.0 and got[1].item() == 0.0


def padded_batch(rows: int = 6, length: int = 16, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (rows, length), generator=g)
    lengths = torch.randint(length // 2, length + 1, (rows,), generator=g)
    lengths[0] = length
    attention_mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    ids[:, 0] = Tok.cls_token_id
    return {"input_ids": ids.masked_fill(attention_mask == 0, Tok.pad_token_id), "attention_mask": attention_mask}


def test_mlm_objective_on_the_accelerator_path_equals_the_gathered_loss(on_accelerator_path):
    torch.manual_seed(0)
    backbone = TransformerEncoder(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    ).eval()
    objective = MaskedLMObjective(backbone, Tok(), seed=0).eval()  # eval: the same masks on every call
    batch = padded_batch()
    corrupted, labels = objective.corrupt(batch)
    hidden = backbone(corrupted, attention_mask=batch["attention_mask"]).last_hidden_state
    weight = backbone.get_input_embeddings().weight
    loss, accuracy, count = gathered_reference(hidden, labels, lambda h: objective.head(h, weight))
    objective.eval()  # back to the start of the evaluation stream
    out = objective(batch, backbone)
    assert 0 < count and int(out.num_predicted_tokens) == count
    torch.testing.assert_close(out.loss, loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.metrics["mlm_acc"], accuracy)


def test_clm_objective_on_the_accelerator_path_equals_the_gathered_loss(on_accelerator_path):
    from lightning_modules.objectives.clm import next_token_labels

    torch.manual_seed(0)
    backbone = TransformerDecoder(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    ).eval()
    objective = CausalLMObjective(backbone)
    batch = padded_batch()
    labels = next_token_labels(batch["input_ids"], batch["attention_mask"])
    hidden = backbone(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    weight = backbone.get_input_embeddings().weight
    loss, accuracy, count = gathered_reference(hidden, labels, lambda h: F.linear(h, weight))
    out = objective(batch, backbone)
    assert int(out.num_predicted_tokens) == count
    torch.testing.assert_close(out.loss, loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.metrics["clm_acc"], accuracy)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (only this test; the others run on CPU)")
def test_mlm_and_clm_training_steps_make_no_host_synchronisation_on_a_gpu():
    """A training step's forward and backward of the MLM and CLM objectives on a GPU, under
    `torch.cuda.set_sync_debug_mode("error")`: any device-to-host synchronisation raises. Skipped
    where no CUDA device is present (the CPU tests above check that the numbers are the same)."""
    device = torch.device("cuda")
    torch.manual_seed(0)
    encoder = TransformerEncoder(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    ).to(device)
    decoder = TransformerDecoder(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    ).to(device)
    mlm = MaskedLMObjective(encoder, Tok(), seed=0).to(device)
    clm = CausalLMObjective(decoder).to(device)
    batch = {k: v.to(device) for k, v in padded_batch().items()}
    for objective, backbone in ((mlm, encoder), (clm, decoder)):
        objective(batch, backbone).loss.backward()  # warm-up: lazy initialisation may synchronise once
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            out = objective(batch, backbone)
            out.loss.backward()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert torch.isfinite(out.loss).item()

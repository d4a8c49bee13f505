"""Bidirectional language modelling (ELMo, Peters et al. 2018): a forward LM and a backward LM
trained jointly, loss = forward NLL + backward NLL. The forward LSTM's top state at t predicts
token t+1, the backward LSTM's top state at t predicts token t-1 (neither has seen the token it
predicts, see lightning_modules.models.lstm). One softmax, tied to the token embeddings, serves
both directions, as ELMo shares its softmax."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.objectives.base import Objective, ObjectiveOutput, token_loss
from lightning_modules.objectives.clm import next_token_labels, shifted_labels
from lightning_modules.objectives.masking import IGNORE_INDEX
from ptmlab.methods.objectives import NoArgumentsParams


def previous_token_labels(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """B×T labels: position t holds token t-1; position 0 and padding hold IGNORE_INDEX."""
    return shifted_labels(input_ids, attention_mask, -1)


class BidirectionalLMObjective(Objective):
    declaration = NoArgumentsParams

    name = "bilm"

    def __init__(self, backbone: nn.Module, tokenizer=None):
        super().__init__()
        embedding_size = backbone.get_input_embeddings().weight.shape[1]
        # The direction's output width D may differ from the embedding width E.
        self.project = (
            nn.Linear(backbone.output_size, embedding_size, bias=False)
            if backbone.output_size != embedding_size
            else None
        )
        self.bias = nn.Parameter(torch.zeros(backbone.get_input_embeddings().weight.shape[0]))

    def _nll(self, states: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor):
        predicted = labels != IGNORE_INDEX
        hidden = states[predicted]  # B×T×D -> N×D
        if self.project is not None:
            hidden = self.project(hidden)
        logits = F.linear(hidden, weight, self.bias)  # N×V
        targets = labels[predicted]
        loss, accuracy = token_loss(logits, targets, states)
        return loss, accuracy, int(targets.numel())

    def forward(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> ObjectiveOutput:
        input_ids, attention_mask = batch["input_ids"], batch.get("attention_mask")
        out = backbone(input_ids, attention_mask=attention_mask)
        weight = backbone.get_input_embeddings().weight
        fwd_loss, fwd_acc, n_fwd = self._nll(
            out.forward_states[-1], next_token_labels(input_ids, attention_mask), weight
        )
        bwd_loss, bwd_acc, n_bwd = self._nll(
            out.backward_states[-1], previous_token_labels(input_ids, attention_mask), weight
        )
        return ObjectiveOutput(
            loss=fwd_loss + bwd_loss,
            metrics={
                "forward_loss": fwd_loss.detach(),
                "backward_loss": bwd_loss.detach(),
                "forward_acc": fwd_acc,
                "backward_acc": bwd_acc,
            },
            num_predicted_tokens=n_fwd + n_bwd,
        )

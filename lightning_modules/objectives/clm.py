"""Causal (left-to-right) language modelling (Radford et al. 2018/2019): predict token t+1 from
tokens ≤ t, with an output layer tied to the backbone's input embeddings (as GPT-2, no bias)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.objectives.base import Objective, ObjectiveOutput, predicted_token_loss
from lightning_modules.objectives.masking import IGNORE_INDEX
from ptmlab.contracts import ConfigError
from ptmlab.methods.objectives import NoArgumentsParams


def shifted_labels(input_ids: torch.Tensor, attention_mask: torch.Tensor | None, shift: Literal[1, -1]) -> torch.Tensor:
    """B×T labels: position t holds token t+shift (shift = 1: the next token, -1: the previous one);
    a position whose target lies outside the sequence, or where it or its target is padding, holds
    IGNORE_INDEX."""
    here, there = (slice(None, -1), slice(1, None)) if shift == 1 else (slice(1, None), slice(None, -1))
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[:, here] = input_ids[:, there]
    if attention_mask is not None:
        both_real = torch.zeros_like(attention_mask, dtype=torch.bool)
        both_real[:, here] = attention_mask[:, there].bool() & attention_mask[:, here].bool()
        labels = labels.masked_fill(~both_real, IGNORE_INDEX)
    return labels


def next_token_labels(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """B×T labels: position t holds token t+1 (`shifted_labels`)."""
    return shifted_labels(input_ids, attention_mask, 1)


class CausalLMObjective(Objective):
    declaration = NoArgumentsParams

    name = "clm"

    def __init__(self, backbone: nn.Module, tokenizer=None):
        super().__init__()
        if not backbone.is_causal:
            raise ConfigError(
                f"objective=clm needs a causal backbone, but model family {backbone.family!r} "
                f"({type(backbone).__name__}) attends to future tokens (is_causal=False); use a decoder model "
                "such as model=gpt_tiny"
            )
        embeddings = backbone.get_input_embeddings()
        if embeddings.weight.shape[1] != backbone.hidden_size:
            # A factorised embedding (E ≠ H) needs a projection back to E before the tied decoder.
            self.project = nn.Linear(backbone.hidden_size, embeddings.weight.shape[1], bias=False)
        else:
            self.project = None

    def forward(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> ObjectiveOutput:
        input_ids, attention_mask = batch["input_ids"], batch.get("attention_mask")
        labels = next_token_labels(input_ids, attention_mask)
        out = backbone(input_ids, attention_mask=attention_mask)
        embedding_weight = backbone.get_input_embeddings().weight

        def project(hidden: torch.Tensor) -> torch.Tensor:
            if self.project is not None:
                hidden = self.project(hidden)  # …×H -> …×E
            return F.linear(hidden, embedding_weight)  # …×E -> …×V

        loss, accuracy, num_predicted = predicted_token_loss(out.last_hidden_state, labels, project)
        return ObjectiveOutput(loss=loss, metrics={"clm_acc": accuracy}, num_predicted_tokens=num_predicted)

"""The objective contract: a module that takes a batch and the backbone and returns a loss and
its metrics. Heads an objective needs (an LM head tied to the input embeddings, an NSP
classifier, ...) are owned by the objective, so backbones stay objective-agnostic.

Corruption functions (masking, span sampling, permutation, noising) are pure functions on token
tensors taking an explicit `torch.Generator`; objectives call them in the training step, so
masking is dynamic (a fresh draw each time a sequence is seen).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class ObjectiveOutput:
    loss: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # e.g. {"mlm_acc": ...}
    num_predicted_tokens: int | None = None  # tokens the loss is averaged over (for perplexity)


class Objective(nn.Module):
    name: str = "objective"

    def forward(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> ObjectiveOutput:  # pragma: no cover
        raise NotImplementedError

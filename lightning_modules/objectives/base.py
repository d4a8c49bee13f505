"""The objective contract: a module that takes a batch and the backbone and returns a loss and
its metrics. Heads an objective needs (an LM head tied to the input embeddings, an NSP
classifier, ...) are owned by the objective, so backbones stay objective-agnostic.

Corruption functions (masking, span sampling, permutation, noising) are pure functions on token
tensors taking an explicit `torch.Generator`; objectives call them in the training step, so
masking is dynamic (a fresh draw each time a sequence is seen).

Which model families an objective trains is stated once, in its config (`compatible_families`,
checked at compose time); what it needs beyond the family is read from the backbone's declared
members (`is_causal`, `hidden_size`, ...; see lightning_modules.models.base.Backbone).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.objectives.masking import IGNORE_INDEX
from ptmlab.methods.fields import TargetNode
from ptmlab.methods.objectives import NoArgumentsParams
from ptmlab.methods.validation import declared_in_code


@dataclass
class ObjectiveOutput:
    loss: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # e.g. {"mlm_acc": ...}
    # Tokens the loss is averaged over (for perplexity). A 0-dim tensor where counting them on the
    # host would make it wait for the device inside the training step.
    num_predicted_tokens: int | torch.Tensor | None = None


class Objective(nn.Module):
    name: str = "objective"
    # Its parameters, their defaults and bounds, declared once (ptmlab.methods.objectives): the
    # constructor takes the validated declaration (`build_objective`) or, in code, its keywords.
    declaration: type[TargetNode] = NoArgumentsParams
    # The loss is a mean NLL over predicted tokens, so validation reports its perplexity.
    predicts_tokens: bool = True
    # Backbone forward passes per training step (NSP runs its own, contrastive learning two).
    backbone_passes: float = 1.0

    def declared_params(self, params: Any, values: dict[str, Any]) -> Any:
        """`params`, or the declaration validated from `values` as a config node would be (one
        ConfigError line naming the key on a bad one)."""
        return params if params is not None else declared_in_code(self, values, "objective.module")

    def forward(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> ObjectiveOutput:  # pragma: no cover
        raise NotImplementedError

    def training_flops_per_token(self, backbone_flops_per_token: float, seq_len: int) -> float:
        """Training FLOPs of one step per input token, given the backbone's own estimate for one
        pass. Objectives whose extra work is not whole backbone passes (ELECTRA's generator
        attention, XLNet's query stream, InfoWord's short n-gram pass) override this."""
        return backbone_flops_per_token * self.backbone_passes


def zero_loss(*graph: torch.Tensor) -> torch.Tensor:
    """0 for a batch with no target (nothing selected, every row padding), instead of NaN (the
    mean of nothing). It still depends on `graph`, so backward runs and every parameter that
    would get a gradient gets a zero one (data-parallel training expects all of them used)."""
    return sum(t.sum() * 0.0 for t in graph)


def token_loss(logits: torch.Tensor, targets: torch.Tensor, *graph: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean cross-entropy, accuracy) of N×V `logits` against N `targets`; both 0 when N = 0
    (see `zero_loss`; `graph` holds the hidden states the logits were computed from)."""
    if targets.numel() == 0:
        zero = zero_loss(logits, *graph)
        return zero, zero.detach()
    return F.cross_entropy(logits.float(), targets), (logits.detach().argmax(-1) == targets).float().mean()


def gathers_predicted_positions(device: torch.device) -> bool:
    """Whether `predicted_token_loss` gathers the predicted positions before the vocabulary
    projection. Boolean indexing has a data-dependent output size, so on an accelerator the host
    waits for the device to count the positions (a sync every step); on a CPU there is nothing
    to wait for, and projecting only the predicted positions is cheaper: MLM (15% predicted) on
    bert_tiny (V=8000, B=32, T=128) takes 0.29-0.34 s a step gathered, 0.77-0.82 s projecting
    every position (one thread)."""
    return device.type == "cpu"


def predicted_token_loss(
    hidden: torch.Tensor, labels: torch.Tensor, project: Callable[[torch.Tensor], torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mean cross-entropy, accuracy, number of predicted tokens) of `project(hidden)` (…×H ->
    …×V) against B×T `labels` (IGNORE_INDEX where nothing is predicted); loss and accuracy are 0
    when nothing is predicted (see `zero_loss`). Gathered on a CPU, every position projected and
    the ignored ones weighted 0 elsewhere (`gathers_predicted_positions`): the same numbers,
    but no host synchronisation on a GPU."""
    predicted = labels != IGNORE_INDEX
    if gathers_predicted_positions(hidden.device):
        logits = project(hidden[predicted])  # B×T×H -> N×H -> N×V
        loss, accuracy = token_loss(logits, labels[predicted], hidden)
        return loss, accuracy, predicted.sum()
    logits = project(hidden).float()  # B×T×H -> B×T×V
    count = predicted.sum()
    # max(N, 1): a batch with nothing to predict has loss and accuracy 0 (not 0/0), and the loss
    # still depends on every position, so backward gives zero gradients as `zero_loss` does.
    denominator = count.clamp(min=1)
    total = F.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
    )  # B×T×V -> BT×V
    correct = (logits.detach().argmax(-1) == labels) & predicted
    return total / denominator, correct.sum() / denominator, count

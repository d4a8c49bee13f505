"""Contrastive sentence learning with in-batch negatives (InfoNCE; SimCSE's unsupervised recipe,
Gao et al. 2021): each sequence is encoded twice with dropout active, the two pooled vectors are
a positive pair and every other sequence in the batch is a negative:

    loss = CE(sim(z_i, z'_j) / τ, target j = i),   sim = cosine,   τ = `temperature`

Two backbone passes per step (the FLOPs estimate counts both). Needs dropout > 0 in the
backbone, otherwise the two views are identical and the task is trivial. Mean pooling is the
default: SimCSE pools [CLS] of an already pre-trained BERT, but from scratch every sequence's
first token starts out the same and training stalls at chance (measured: ln B after 40 steps).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.objectives.base import Objective, ObjectiveOutput
from ptmlab.contracts import ConfigError
from ptmlab.methods.objectives import ContrastiveSentenceParams

POOLINGS = ("cls", "mean")


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor | None, pooling: str) -> torch.Tensor:
    """B×T×H -> B×H: the first token, or the mean over real tokens."""
    if pooling == "cls":
        return hidden[:, 0]
    if attention_mask is None:
        return hidden.mean(dim=1)
    weights = attention_mask.to(hidden.dtype).unsqueeze(-1)  # B×T -> B×T×1
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)


def info_nce(queries: torch.Tensor, keys: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, accuracy) of matching query i to key i among all B keys by cosine similarity."""
    logits = F.normalize(queries.float(), dim=-1) @ F.normalize(keys.float(), dim=-1).T / temperature  # B×B
    targets = torch.arange(logits.shape[0], device=logits.device)
    return F.cross_entropy(logits, targets), (logits.detach().argmax(-1) == targets).float().mean()


class ContrastiveSentenceObjective(Objective):
    declaration = ContrastiveSentenceParams

    name = "contrastive"
    predicts_tokens = False
    backbone_passes = 2.0

    def __init__(
        self, backbone: nn.Module, tokenizer=None, params: ContrastiveSentenceParams | None = None, **values: Any
    ):
        super().__init__()
        self.params = params = self.declared_params(params, values)
        if params.pooling == "cls" and backbone.is_causal:
            raise ConfigError(
                "objective.module.pooling=cls on a causal backbone reads a token that sees "
                "nothing of the sentence; use pooling=mean"
            )
        self.temperature, self.pooling = float(params.temperature), params.pooling
        h = backbone.hidden_size
        # SimCSE's MLP over the pooled vector during training.
        self.projection = nn.Sequential(nn.Linear(h, h), nn.Tanh()) if params.projection else nn.Identity()

    def embed(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> torch.Tensor:
        out = backbone(
            batch["input_ids"], attention_mask=batch.get("attention_mask"), token_type_ids=batch.get("token_type_ids")
        )
        return self.projection(pool(out.last_hidden_state, batch.get("attention_mask"), self.pooling))

    def forward(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> ObjectiveOutput:
        first, second = self.embed(batch, backbone), self.embed(batch, backbone)  # two dropout masks
        loss, accuracy = info_nce(first, second, self.temperature)
        return ObjectiveOutput(loss=loss, metrics={"contrastive_acc": accuracy})

"""Feature-based adaptation (ELMo, Peters et al. 2018): the backbone is frozen; the task head
reads a learned softmax-normalised scalar mix of ALL layers' hidden states, scaled by gamma."""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from ptmlab.methods.adaptation import AdaptationParams


class ScalarMix(nn.Module):
    """gamma · Σ_l softmax(s)_l · h_l over the L+1 hidden states (embeddings first)."""

    def __init__(self, num_states: int):
        super().__init__()
        self.scalars = nn.Parameter(torch.zeros(num_states))
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, hidden_states: tuple[torch.Tensor, ...]) -> torch.Tensor:
        weights = torch.softmax(self.scalars, dim=0)
        stacked = torch.stack(hidden_states, dim=0)  # (L+1)×B×T×H
        return self.gamma * (weights.view(-1, 1, 1, 1) * stacked).sum(dim=0)  # B×T×H


class FeatureBased(Adaptation):
    declaration = AdaptationParams

    name = "feature"
    uses_scalar_mix = True

    def prepare(self, model: nn.Module) -> None:
        set_trainable([model.backbone], False)
        set_trainable([model.scalar_mix, model.head], True)
        model.backbone.eval()  # frozen features: no dropout noise in them
        model.freeze_backbone_mode = True

"""L2-SP (Li et al. 2018): full fine-tuning plus (alpha/2)·||w - w0||² pulling the backbone
towards its pre-trained weights w0 (instead of towards zero)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lightning_modules.adaptation.base import Adaptation
from ptmlab.methods.adaptation import L2SPParams


class L2SP(Adaptation):
    declaration = L2SPParams

    name = "l2sp"

    takes_declaration = True

    def __init__(self, params: L2SPParams | None = None, **values: Any):
        self.params = self.declared_params(params, values)
        self.alpha = float(self.params.alpha)
        self.reference: dict[str, torch.Tensor] = {}

    def prepare(self, model: nn.Module) -> None:
        super().prepare(model)
        self.reference = {n: p.detach().clone() for n, p in model.backbone.named_parameters()}

    def regularization(self, model: nn.Module) -> torch.Tensor:
        total = 0.0
        for name, p in model.backbone.named_parameters():
            ref = self.reference[name].to(p.device)
            total = total + (p - ref).pow(2).sum()
        return 0.5 * self.alpha * total

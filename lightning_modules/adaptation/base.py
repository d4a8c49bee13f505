"""How a backbone is adapted to a task. An adaptation mode decides which parameters train, may
insert modules (adapters, a scalar mix), may change learning rates per parameter group, may add
a regulariser, and may change what trains as training goes on (gradual unfreezing).

The finetune stage calls, in order: `prepare(model)` once, `param_groups(model, lr, wd)` for
the optimizer, then `on_train_step(model, step, total_steps)` before every step and
`regularization(model)` inside every step's loss.
"""

from __future__ import annotations

import torch
from torch import nn


def set_trainable(modules, trainable: bool) -> None:
    for module in modules:
        for p in module.parameters():
            p.requires_grad_(trainable)


def count_trainable(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


class Adaptation:
    name = "full"
    uses_scalar_mix = False  # the head reads an ELMo-style mix of all layers instead of the top

    def prepare(self, model: nn.Module) -> None:
        """Set requires_grad / insert modules. Default: everything trains."""
        set_trainable([model], True)

    def insert_modules(self, model: nn.Module) -> None:
        """Only the modules `prepare` inserts into the model, with fresh weights: what loading a
        saved task model needs to rebuild its structure before its weights are read. Default: none."""
        return None

    def param_groups(self, model: nn.Module, lr: float, weight_decay: float) -> list[dict]:
        from lightning_modules.optim import decay_param_groups

        return decay_param_groups(model.named_parameters(), weight_decay, lr=lr)

    def on_train_step(self, model: nn.Module, step: int, total_steps: int) -> None:
        return None

    def regularization(self, model: nn.Module) -> torch.Tensor | float:
        return 0.0

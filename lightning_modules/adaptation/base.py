"""How a backbone is adapted to a task. An adaptation mode decides which parameters train, may
insert modules (adapters, a scalar mix), may change learning rates per parameter group, may add
a regulariser, and may change what trains as training goes on (gradual unfreezing).

The finetune stage calls, in order: `bind(task, resolved)` (what the mode needs to know of the
task and the backbone's source: a prompt template, the LM head), `prepare(model)` once,
`param_groups(model, lr, wd)` for the optimizer, then `on_train_step(model, step, total_steps)`
before every step and `regularization(model)` inside every step's loss; after training,
`finalize(model)` (LoRA merges its update into the weights) and `saved_node(node)` for the task
model's manifest. A mode with `trains = False` (zero-shot prompting) is evaluated without training.

What must be stored per task (the *delta*) is every parameter that trained, plus whatever the
mode inserted that stays fixed (`delta_state`): the leaderboard reports its size beside the score.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lightning_modules.optim import decay_param_groups
from ptmlab.methods.validation import declared


def set_trainable(modules, trainable: bool) -> None:
    for module in modules:
        for p in module.parameters():
            p.requires_grad_(trainable)


def count_trainable(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


class Adaptation:
    name = "full"
    uses_scalar_mix = False  # the head reads an ELMo-style mix of all layers instead of the top
    trains = True  # False: the stage evaluates the adapted model as it is (zero-shot)
    checks_backbone_layers = False  # True: `check_backbone` refuses settings from the layers alone
    # True: the constructor takes the validated declaration, `Mode(params)` (`build_adaptation`
    # passes it); values given in code as keywords are validated by the same declaration.
    takes_declaration = False

    def declared_params(self, params: Any, values: dict[str, Any]) -> Any:
        """`params`, or the declaration validated from `values` (one ConfigError line on a bad one)."""
        if params is not None:
            return params
        target = f"{type(self).__module__}.{type(self).__qualname__}"
        return declared(self.declaration, {"name": self.name, "_target_": target, **values}, "adaptation")

    def check_backbone(self, backbone: nn.Module) -> None:
        """Refuse (ConfigError) what the backbone's layers alone rule out, before any weight
        exists: stage=finetune's preflight builds the backbone on the meta device to ask
        (adaptation/read_ahead.py). Default: nothing to check."""
        return None

    def bind(self, task, resolved) -> None:
        """Called before `prepare` with the LoadedTask and the ResolvedBackbone (artifacts/backbone_reference.py).
        Default: nothing to know. Raise ConfigError here for a combination that cannot work."""
        return None

    def prepare(self, model: nn.Module) -> None:
        """Set requires_grad / insert modules. Default: everything trains."""
        set_trainable([model], True)

    def insert_modules(self, model: nn.Module) -> None:
        """Only the modules `prepare` inserts into the model, with fresh weights: what loading a
        saved task model needs to rebuild its structure before its weights are read. Default: none."""
        return None

    def param_groups(self, model: nn.Module, lr: float, weight_decay: float) -> list[dict]:

        return decay_param_groups(model.named_parameters(), weight_decay, lr=lr)

    def on_train_step(self, model: nn.Module, step: int, total_steps: int) -> None:
        return None

    def regularization(self, model: nn.Module) -> torch.Tensor | float:
        return 0.0

    def finalize(self, model: nn.Module) -> None:
        """After training, before predictions and export. Default: nothing."""
        return None

    def saved_node(self, node: dict) -> dict:
        """The adaptation node written to a saved task model's manifest, from the run's config
        node: whatever `insert_modules` needs to rebuild the structure (default: the node as is)."""
        return node

    def delta_state(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """What must be stored per task on top of the shared pre-trained backbone: the parameters
        that train (names as in model.state_dict())."""
        return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}

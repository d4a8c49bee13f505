"""Optimizer and schedule from `cfg.optimizer` / `cfg.scheduler` (partial `_target_` nodes), shared by
the stages and by adaptation modes that shape parameter groups (outside stages/, so adaptation
never imports a stage).

`scheduler.warmup_ratio` is a fraction of the total steps; it is converted here to the
`num_warmup_steps` that the transformers schedule functions take.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn


def decay_param_groups(named_params: Iterable[tuple[str, nn.Parameter]], weight_decay: float,
                       lr: float | None = None, include_frozen: bool = False) -> list[dict]:
    """No weight decay on biases and LayerNorm/embedding-norm weights (1-D tensors), as BERT.
    Frozen parameters are left out unless `include_frozen` (schedules that unfreeze later)."""
    decay, no_decay = [], []
    for _, p in named_params:
        if not p.requires_grad and not include_frozen:
            continue
        (no_decay if p.ndim < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if lr is not None:
        for g in groups:
            g["lr"] = lr
    return [g for g in groups if g["params"]]


def build_optimizer(param_groups: list[dict], optimizer_cfg: DictConfig) -> torch.optim.Optimizer:
    factory = instantiate(optimizer_cfg)
    return factory(param_groups)


def build_scheduler(optimizer: torch.optim.Optimizer, scheduler_cfg: DictConfig | None, total_steps: int):
    """Returns a Lightning lr_scheduler dict (stepped every optimizer step) or None."""
    if scheduler_cfg is None:
        return None
    sched = OmegaConf.to_container(scheduler_cfg, resolve=True)
    warmup_ratio = float(sched.pop("warmup_ratio", 0.0))
    factory = instantiate(sched)
    accepted = inspect.signature(factory.func if hasattr(factory, "func") else factory).parameters
    kwargs = {}
    if "num_warmup_steps" in accepted:
        kwargs["num_warmup_steps"] = int(round(warmup_ratio * max(total_steps, 1)))
    if "num_training_steps" in accepted:
        kwargs["num_training_steps"] = max(total_steps, 1)
    return {"scheduler": factory(optimizer, **kwargs), "interval": "step", "frequency": 1}

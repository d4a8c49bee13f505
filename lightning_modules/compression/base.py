"""What every compression method is, and the short training loop they share.

A method is a `_target_` node of `conf/compression/<name>.yaml`, built with its settings:

    method.check(source, ctx)     ConfigError on bad input, before any training (exit 2)
    method.compress(source, ctx)  -> Compressed: the compressed model, its structural edits
                                  (artifacts/saved_task_model.py `compression`), extra summary numbers

`source` is a LoadedTaskModel (artifacts/saved_task_model.py); `ctx` carries the task, the training
settings of `stage`, the cache folder and a metric logger. Recovery fine-tuning, distillation
and QAT train with `train_epochs`: a plain PyTorch loop (seeded shuffling, the method's own loss),
since a compression run is a few epochs of one model on CPU; its AdamW and linear warm-up then
decay are built by lightning_modules/optim.py, as the fine-tuning stages build theirs.
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from torch import nn

from lightning_modules.heads.evaluation import task_loss
from lightning_modules.optim import build_optimizer, build_scheduler, decay_param_groups
from lightning_modules.tasks.datamodule import TaskDataModule
from ptmlab.methods.compression import CompressionParams
from ptmlab.methods.validation import declared_in_code

# The loop's optimizer and schedule (lr and warmup_ratio come from the stage or the method): weight
# decay 0.01 off biases and norms, torch's default betas and eps. Not the root `optimizer` node:
# that one is pre-training's (betas 0.98, eps 1e-6, lr 5e-4).
LOOP_OPTIMIZER = OmegaConf.create(
    {
        "_target_": "torch.optim.AdamW",
        "_partial_": True,
        "weight_decay": 0.01,
        "betas": [0.9, 0.999],
        "eps": 1e-8,
        "fused": None,
    }
)
LOOP_SCHEDULE = {"_target_": "transformers.get_linear_schedule_with_warmup", "_partial_": True}


@dataclass
class CompressContext:
    task: Any  # LoadedTask
    seed: int = 0
    batch_size: int = 32
    eval_batch_size: int = 128
    lr: float = 5e-5
    warmup_ratio: float = 0.1
    group_by_length: bool = False  # training batches of similar lengths (stage.group_by_length)
    cache_dir: Path | None = None
    log: Callable[[dict, int], None] | None = None  # metrics, step -> MLflow
    progress: Callable[..., None] | None = None  # step, total, metrics, series (the loop's prefix) -> progress.json


@dataclass
class Compressed:
    model: nn.Module  # a PooledEncoder (TaskModel)
    edits: list[dict] = field(default_factory=list)  # structural edits this method made
    numbers: dict = field(default_factory=dict)  # extra summary fields (sparsity, heads ...)
    model_cfg: dict | None = None  # for a ptmlab backbone whose config changed
    # Every `train_epochs` result of the method, in order: the extra training the compressed model
    # got beyond its source's, which the control replays (compression/control.py).
    training: list[dict] = field(default_factory=list)
    control_start: nn.Module | None = None  # what the control trains (None: the source itself)


class CompressionMethod:
    """Base of every method. Its settings are its validated declaration (`params`, a
    `ptmlab.methods.compression` model: the one statement of each key, its default and bounds):
    `finetune_epochs` is the optional recovery fine-tune; a method that trains declares `control`
    (default true): the stage then gives the source the same extra training without compressing
    it and reports both (compression/control.py)."""

    name = "compression"
    # Whether it compresses a generator (task.kind=generation): its decoding twin, decoder layers and
    # per-token losses handled; the stage refuses the others on one before any work.
    takes_generators = False
    declaration: type[CompressionParams]  # each method names its own (`declaration = DistillParams`)
    params: CompressionParams

    def __init__(self, params: CompressionParams | None = None, **values: Any):
        """`params`: the validated declaration (the compress stage builds it from the node); in code,
        its values as keywords (`PruneHeads(fraction=0.5)`), validated by the same declaration: one
        ConfigError line naming the key on a bad one."""
        self.params = params if params is not None else declared_in_code(self, values, "compression")

    @property
    def control(self) -> bool:
        """Whether the stage trains a control; a method that never trains has nothing to control."""
        return bool(getattr(self.params, "control", False))

    def settings(self) -> dict:
        """The method's settings as run (the summary's `config`): every declared key but name and target."""
        return self.params.model_dump(exclude={"name", "target"})

    def check(self, source, ctx: CompressContext) -> None:
        """Refuse bad input before training (ConfigError naming the key)."""

    def compress(self, source, ctx: CompressContext) -> Compressed:  # pragma: no cover - abstract
        raise NotImplementedError


def copy_model(source) -> nn.Module:
    """A trainable deep copy of a loaded task model's module (the source stays as loaded)."""
    model = copy.deepcopy(source.model)
    model.requires_grad_(True)
    return model


def train_loader(ctx: CompressContext, model: nn.Module, tokenizer, shuffle: bool = True):
    """The task's training batches as `model` reads them: its own input encoder (a token or span
    head's word/window encoding, a generator's source and target), as the finetune stage feeds it."""
    spec = ctx.task.spec
    dm = TaskDataModule(
        ctx.task,
        tokenizer,
        causal=bool(model.backbone.is_causal),
        batch_size=ctx.batch_size,
        eval_batch_size=ctx.eval_batch_size,
        seed=ctx.seed,
        group_by_length=ctx.group_by_length,
        encoder=model.input_encoder(tokenizer, spec.max_length, doc_stride=spec.doc_stride),
    )
    return dm.train_dataloader() if shuffle else dm._loader(ctx.task.data.train_split, False, ctx.batch_size)


def train_epochs(
    model: nn.Module,
    tokenizer,
    ctx: CompressContext,
    *,
    epochs: int,
    lr: float | None = None,
    loss_fn: Callable[[nn.Module, dict], tuple[torch.Tensor, dict]] | None = None,
    prefix: str = "recovery",
    on_step: Callable[[int, int], None] | None = None,
    named_params: list[tuple[str, nn.Parameter]] | None = None,
) -> dict:
    """Train `model` for `epochs` on the task's train split; returns what it trained: {prefix,
    epochs, lr, steps, examples, examples_digest (sha256 of the example indices in the order
    trained), train_time_s}. `loss_fn(model, batch) -> (loss, metrics)` defaults to the task loss;
    `on_step(step, total)` runs before each optimizer step (pruning schedules); `named_params`
    (default: the model's trainable ones) are what the optimizer steps."""
    record = {"prefix": prefix, "epochs": max(0, int(epochs)), "lr": float(lr or ctx.lr)}
    if epochs <= 0:
        return {**record, "steps": 0, "examples": 0, "examples_digest": None, "train_time_s": 0.0}
    torch.manual_seed(ctx.seed)
    loader = train_loader(ctx, model, tokenizer)
    total = epochs * len(loader)
    named_params = named_params if named_params is not None else list(model.named_parameters())
    groups = decay_param_groups(named_params, LOOP_OPTIMIZER.weight_decay, lr=record["lr"])
    params = [p for group in groups for p in group["params"]]
    optimizer = build_optimizer(groups, LOOP_OPTIMIZER)
    scheduler = build_scheduler(
        optimizer, OmegaConf.create({**LOOP_SCHEDULE, "warmup_ratio": ctx.warmup_ratio}), total
    )["scheduler"]
    loss_fn = loss_fn or (lambda m, b: (task_loss(ctx.task.spec, m(b), b["labels"]), {}))
    model.train()
    step, examples, order, started = 0, 0, hashlib.sha256(), time.perf_counter()
    for _ in range(epochs):
        for batch in loader:
            seen = batch["example_index"].detach().cpu().to(torch.int64)
            order.update(seen.numpy().tobytes())
            examples += int(seen.numel())
            if on_step is not None:
                on_step(step, total)
            loss, extra = loss_fn(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
            step += 1
            logging_step = step % 25 == 0 or step == total
            if ctx.log is not None and logging_step:
                ctx.log(
                    {f"{prefix}/loss": float(loss.detach()), **{f"{prefix}/{k}": float(v) for k, v in extra.items()}},
                    step,
                )
            if ctx.progress is not None:  # the reporter writes at most once a second
                ctx.progress(step, total, {"train/loss": float(loss.detach())} if logging_step else {}, prefix)
    model.eval()
    return {
        **record,
        "steps": step,
        "examples": examples,
        "examples_digest": order.hexdigest(),
        "train_time_s": round(time.perf_counter() - started, 3),
    }

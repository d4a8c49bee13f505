"""`trainer` (Lightning's Trainer and ptmlab's speed switches), `optimizer` (torch.optim,
`_partial_`) and `scheduler` (transformers' warmup schedules, `_partial_`): library classes and
functions, which cannot name their declaration, so these maps are the only link."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ptmlab.methods.fields import (
    NODE,
    Dropout,
    Name,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    TargetNode,
    WarmupRatio,
    checked,
    in_range,
    is_int,
    is_number,
)


def _devices(v: Any) -> bool:
    if is_int(v):
        return v == -1 or v >= 1
    if isinstance(v, str):
        return bool(v.strip())
    return isinstance(v, list) and bool(v) and all(is_int(i) and i >= 0 for i in v)


def _count_or_fraction(v: Any) -> bool:
    """Lightning's `limit_*_batches` / `overfit_batches`: an int count >= 0 or a fraction in [0, 1]."""
    return (is_int(v) and v >= 0) or (isinstance(v, float) and is_number(v) and 0.0 <= v <= 1.0)


def _val_check_interval(v: Any) -> bool:
    """Steps (int >= 1), a fraction of an epoch in (0, 1], or a duration."""
    if is_int(v):
        return v >= 1
    if isinstance(v, float):
        return is_number(v) and 0.0 < v <= 1.0
    return v is None or isinstance(v, str | dict)


Precision = Literal[
    "transformer-engine",
    "transformer-engine-float16",
    "16-true",
    "16-mixed",
    "bf16-true",
    "bf16-mixed",
    "32-true",
    "64-true",
    "64",
    "32",
    "16",
    "bf16",
    64,
    32,
    16,
]


class LightningTrainerParams(TargetNode):
    """lightning.pytorch.Trainer's arguments, less `logger`, `callbacks`, `default_root_dir` and
    `plugins`: the stage sets those (a value here would be silently replaced)."""

    accelerator: Literal["auto", "cpu", "gpu", "cuda", "mps", "tpu", "hpu"] = "auto"
    strategy: Name = "auto"  # ddp, fsdp, deepspeed_stage_2 ... (Lightning's registry checks the name)
    devices: Annotated[
        Any, checked(_devices, "a device count >= 1, -1 (all), a string like '0,1' or a list of device indices")
    ] = "auto"
    num_nodes: PositiveInt = 1
    precision: Precision | None = None
    fast_dev_run: Annotated[
        Any, checked(lambda v: isinstance(v, bool) or (is_int(v) and v >= 0), "true, false or a number of batches >= 0")
    ] = False
    max_epochs: Annotated[int, in_range(-1, what="an integer")] | None = None  # -1: no limit
    min_epochs: NonNegativeInt | None = None
    max_steps: Annotated[int, in_range(-1, what="an integer")] = -1  # -1: no limit
    min_steps: NonNegativeInt | None = None
    max_time: Annotated[
        Any,
        checked(
            lambda v: v is None or isinstance(v, str | dict), "a duration 'DD:HH:MM:SS' or a mapping like {hours: 1}"
        ),
    ] = None
    limit_train_batches: Annotated[
        Any, checked(lambda v: v is None or _count_or_fraction(v), "a number of batches >= 0 or a fraction in [0, 1]")
    ] = None
    limit_val_batches: Annotated[
        Any, checked(lambda v: v is None or _count_or_fraction(v), "a number of batches >= 0 or a fraction in [0, 1]")
    ] = None
    limit_test_batches: Annotated[
        Any, checked(lambda v: v is None or _count_or_fraction(v), "a number of batches >= 0 or a fraction in [0, 1]")
    ] = None
    limit_predict_batches: Annotated[
        Any, checked(lambda v: v is None or _count_or_fraction(v), "a number of batches >= 0 or a fraction in [0, 1]")
    ] = None
    overfit_batches: Annotated[Any, checked(_count_or_fraction, "a number of batches >= 0 or a fraction in [0, 1]")] = (
        0.0
    )
    val_check_interval: Annotated[
        Any, checked(_val_check_interval, "a number of steps >= 1 or a fraction of an epoch in (0, 1]")
    ] = None
    check_val_every_n_epoch: PositiveInt | None = 1
    num_sanity_val_steps: Annotated[int, in_range(-1, what="an integer")] | None = None
    log_every_n_steps: PositiveInt | None = None
    enable_checkpointing: bool | None = None
    enable_progress_bar: bool | None = None
    enable_model_summary: bool | None = None
    accumulate_grad_batches: PositiveInt = 1
    gradient_clip_val: NonNegativeFloat | None = None
    gradient_clip_algorithm: Literal["norm", "value"] | None = None
    deterministic: Annotated[
        Any, checked(lambda v: v is None or isinstance(v, bool) or v == "warn", "true, false or 'warn'")
    ] = None
    benchmark: bool | None = None
    inference_mode: bool = True
    use_distributed_sampler: bool = True
    profiler: Name | None = None
    detect_anomaly: bool = False
    barebones: bool = False
    sync_batchnorm: bool = False
    reload_dataloaders_every_n_epochs: NonNegativeInt = 0
    enable_autolog_hparams: bool = True
    model_registry: str | None = None


class TrainerParams(LightningTrainerParams):
    """Lightning's arguments plus ptmlab's own speed switches, which `StageRun.build_trainer` takes
    out before the rest reaches Lightning (lightning_modules/runtime/speed.py applies them)."""

    compile: bool = False  # torch.compile the backbone (eager, with the reason logged, if it fails)
    compile_backend: Name = "inductor"
    compile_mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] | None = None
    activation_checkpointing: bool = False  # recompute each layer's activations in the backward pass
    peak_flops: PositiveFloat | None = None  # one device's peak FLOP/s at this precision (MFU); null: the GPU table

    @model_validator(mode="after")
    def _fsdp_needs_gpus(self):
        # Lightning's FSDPStrategy refuses accelerator=cpu; say so before any work starts.
        if str(self.strategy).startswith("fsdp") and self.accelerator == "cpu":
            raise ValueError(
                f"{NODE}.strategy={self.strategy} needs GPUs (Lightning's FSDP strategy refuses "
                f"accelerator=cpu); use trainer=ddp to train on several CPU processes"
            )
        return self


TRAINERS = {"lightning.pytorch.Trainer": TrainerParams, "pytorch_lightning.Trainer": TrainerParams}


def _betas(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(is_number(b) and 0.0 <= b < 1.0 for b in v)


class PartialParams(TargetNode):
    # The stage calls the node with what it builds (the parameter groups, the optimizer).
    partial: Literal[True] = Field(True, alias="_partial_")


class AdamParams(PartialParams):
    """torch.optim.Adam / AdamW."""

    lr: PositiveFloat = 1e-3
    betas: Annotated[Any, checked(_betas, "two numbers in [0, 1), like [0.9, 0.999]")] = [0.9, 0.999]
    eps: PositiveFloat = 1e-8
    weight_decay: NonNegativeFloat = 0.01
    amsgrad: bool = False
    maximize: bool = False
    foreach: bool | None = None
    capturable: bool = False
    differentiable: bool = False
    fused: bool | None = None


class SGDParams(PartialParams):
    lr: PositiveFloat = 1e-3
    momentum: Dropout = 0.0  # in [0, 1)
    dampening: NonNegativeFloat = 0.0
    weight_decay: NonNegativeFloat = 0.0
    nesterov: bool = False
    maximize: bool = False
    foreach: bool | None = None
    differentiable: bool = False
    fused: bool | None = None


OPTIMIZERS = {"torch.optim.AdamW": AdamParams, "torch.optim.Adam": AdamParams, "torch.optim.SGD": SGDParams}


class WarmupScheduleParams(PartialParams):
    """`warmup_ratio` is a fraction of the total steps: lightning_modules/optim.py turns it
    into `num_warmup_steps` and passes `num_training_steps`, so neither belongs here."""

    warmup_ratio: WarmupRatio = 0.0


class CosineScheduleParams(WarmupScheduleParams):
    num_cycles: PositiveFloat = 0.5


SCHEDULERS = {
    "transformers.get_linear_schedule_with_warmup": WarmupScheduleParams,
    "transformers.get_constant_schedule_with_warmup": WarmupScheduleParams,
    "transformers.get_cosine_schedule_with_warmup": CosineScheduleParams,
}

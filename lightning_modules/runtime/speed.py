"""ptmlab's speed switches of `cfg.trainer` (taken out before Lightning sees the rest):

- `compile`: `torch.compile` of the backbone in place (`nn.Module.compile`, so parameter names
  and checkpoints are unchanged). A backend that cannot be set up, or a graph that fails to
  compile, leaves the backbone eager (Dynamo's `suppress_errors`), and the run says why: a warning
  in the log and the MLflow tag `ptmlab.compile` ("compiled", or "eager: <reason>").
- `activation_checkpointing`: each layer of `backbone.layer_modules()` recomputes its activations
  in the backward pass instead of keeping them (torch.utils.checkpoint, non-reentrant), trading
  about one extra forward for memory.

Both are applied in the `setup` hook, before the strategy wraps the model (DDP/FSDP) and moves it.

Fused AdamW is the optimizer default (lightning_modules/optim.py); `UnscalingMixedPrecision` lets
Lightning clip its gradients under mixed precision, and `check_trainer_and_optimizer` refuses the
combinations that still cannot work, before training.
"""

from __future__ import annotations

import logging
import types

import torch
from lightning.pytorch import Callback
from lightning.pytorch.plugins.precision import MixedPrecision, Precision
from lightning.pytorch.utilities import GradClipAlgorithmType
from torch import nn

log = logging.getLogger(__name__)
TRAINER_SPEED_KEYS = ("compile", "compile_backend", "compile_mode", "activation_checkpointing", "peak_flops")


def split_trainer_config(trainer_cfg: dict) -> tuple[dict, dict]:
    """(Lightning's Trainer arguments, ptmlab's speed switches) of a resolved `cfg.trainer`."""
    lightning_cfg = dict(trainer_cfg)
    speed = {k: lightning_cfg.pop(k) for k in TRAINER_SPEED_KEYS if k in lightning_cfg}
    return lightning_cfg, speed


def check_trainer_and_optimizer(trainer_cfg: dict, optimizer_cfg) -> None:
    """ConfigError for combinations that would fail (or clip wrongly) only once training has
    started. A fused optimizer with clipping under mixed precision is not one of them (see
    `UnscalingMixedPrecision`), except under FSDP with a gradient scaler, whose precision plugin
    would clip the still-scaled gradients of a fused optimizer."""
    from ptmlab.contracts import ConfigError

    if optimizer_cfg is None or not optimizer_cfg.get("fused"):
        return
    if optimizer_cfg.get("foreach"):
        raise ConfigError(
            "optimizer.fused=true with optimizer.foreach=true: torch takes one or the other; set optimizer.foreach=null"
        )
    precision = str(trainer_cfg.get("precision") or "")
    clip = trainer_cfg.get("gradient_clip_val") or 0
    if "fsdp" in str(trainer_cfg.get("strategy") or "").lower() and precision.startswith("16-mixed") and clip:
        raise ConfigError(
            f"optimizer.fused=true with trainer.strategy=fsdp, trainer.precision={precision} and "
            f"trainer.gradient_clip_val={clip}: FSDP's precision plugin would clip scaled gradients; "
            f"set optimizer.fused=null, trainer.gradient_clip_val=0 or trainer.precision=bf16-mixed"
        )


class UnscalingMixedPrecision(MixedPrecision):
    """Lightning's MixedPrecision plugin, except that a fused optimizer's gradients are unscaled
    before they are clipped, so a fused optimizer and clipping go together under mixed precision.

    Lightning skips `scaler.unscale_` for an optimizer that unscales inside its own step (fused
    AdamW) and therefore refuses to clip its gradients. torch's GradScaler supports unscaling
    first: `scaler.step` then hands the fused step no scale, only the inf/NaN flag, so an
    overflowing step is still skipped (what the Hugging Face Trainer does through Accelerate).
    bf16-mixed has no scaler: its gradients are never scaled, so clipping them was always right."""

    # Read by lightning_modules.optim.fused_by_default (optim cannot import runtime/).
    unscales_fused_optimizers = True

    def optimizer_step(self, optimizer, model, closure, **kwargs):
        from lightning.fabric.plugins.precision.amp import _optimizer_handles_unscaling

        if self.scaler is None or not _optimizer_handles_unscaling(optimizer):
            return super().optimizer_step(optimizer, model=model, closure=closure, **kwargs)
        closure_result = closure()
        # As Lightning's: a training_step that returned None ran no backward, so nothing to step.
        if closure_result is None and model.automatic_optimization:
            self._after_closure(model, optimizer)
            return closure_result
        self.scaler.unscale_(optimizer)
        self._after_closure(model, optimizer)  # on_before_optimizer_step hooks, then clipping
        step_output = self.scaler.step(optimizer, **kwargs)
        self.scaler.update()
        return step_output

    def clip_gradients(self, optimizer, clip_val=0.0, gradient_clip_algorithm=GradClipAlgorithmType.NORM) -> None:
        # MixedPrecision.clip_gradients refuses a fused optimizer; its gradients are unscaled here.
        Precision.clip_gradients(self, optimizer, clip_val, gradient_clip_algorithm)


def unscale_before_clipping(trainer) -> None:
    """Give `trainer` UnscalingMixedPrecision where Lightning chose its plain MixedPrecision plugin
    (FSDP and DeepSpeed bring their own plugins and keep them)."""
    plugin = trainer.strategy.precision_plugin
    if type(plugin) is MixedPrecision:
        trainer.strategy.precision_plugin = UnscalingMixedPrecision(plugin.precision, plugin.device, plugin.scaler)


def backbone_of(pl_module) -> nn.Module:
    """The backbone of a stage's LightningModule (pretrain: `.backbone`; finetune: `.model.backbone`)."""
    if isinstance(getattr(pl_module, "backbone", None), nn.Module):
        return pl_module.backbone
    return pl_module.model.backbone


def _checkpointed_forward(self, *args, **kwargs):
    forward = type(self).forward
    if self.training and torch.is_grad_enabled():
        return torch.utils.checkpoint.checkpoint(forward, self, *args, use_reentrant=False, **kwargs)
    return forward(self, *args, **kwargs)


def checkpoint_layers(backbone: nn.Module) -> int:
    """Activation checkpointing of every distinct layer module; returns how many were wrapped.
    A bound method on the instance (not a wrapper module) keeps parameter names, and
    `copy.deepcopy` rebinds it to the copy."""
    seen: set[int] = set()
    for layer in backbone.layer_modules():
        if id(layer) in seen:  # cross-layer sharing (ALBERT): one module, many applications
            continue
        seen.add(id(layer))
        layer.forward = types.MethodType(_checkpointed_forward, layer)
    return len(seen)


def compile_backbone(backbone: nn.Module, backend: str = "inductor", mode: str | None = None) -> str:
    """Compile in place; returns "compiled" or "eager: <why>" (also logged as a warning)."""
    import torch._dynamo

    # A graph that fails to compile runs eagerly instead of failing the job.
    torch._dynamo.config.suppress_errors = True
    try:
        if backend not in torch._dynamo.list_backends(exclude_tags=()):
            raise ValueError(
                f"unknown torch.compile backend {backend!r} (known: {', '.join(torch._dynamo.list_backends())})"
            )
        backbone.compile(backend=backend, mode=mode)
    except Exception as exc:
        reason = f"eager: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        log.warning("trainer.compile=true, but the backbone runs eagerly: %s", reason)
        return reason
    return "compiled"


class SpeedSwitches(Callback):
    def __init__(
        self,
        compile: bool = False,
        compile_backend: str = "inductor",
        compile_mode: str | None = None,
        activation_checkpointing: bool = False,
    ):
        self.compile, self.compile_backend, self.compile_mode = compile, compile_backend, compile_mode
        self.activation_checkpointing = activation_checkpointing
        self.compile_status: str | None = None
        self.checkpointed_layers = 0
        self._applied = False

    def setup(self, trainer, pl_module, stage: str) -> None:
        if self._applied or stage != "fit":
            return
        self._applied = True
        backbone = backbone_of(pl_module)
        if self.activation_checkpointing:
            self.checkpointed_layers = checkpoint_layers(backbone)
        if self.compile:
            self.compile_status = compile_backbone(backbone, self.compile_backend, self.compile_mode)
        if trainer.logger is not None and hasattr(trainer.logger, "experiment") and trainer.is_global_zero:
            tags = {}
            if self.compile:
                tags["ptmlab.compile"] = self.compile_status
            if self.activation_checkpointing:
                tags["ptmlab.activation_checkpointing"] = f"{self.checkpointed_layers} layers"
            for key, value in tags.items():
                trainer.logger.experiment.set_tag(trainer.logger.run_id, key, value)

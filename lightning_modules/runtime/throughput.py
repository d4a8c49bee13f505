"""How fast a run trains, as first-class metrics: tokens/s (non-padding tokens), samples/s, model
FLOPs utilisation, the fraction of wall time spent between steps (waiting for data) and the
padding fraction of the batches.

MFU = achieved model FLOPs/s ÷ the device's peak dense FLOPs/s at the precision in use. The
achieved FLOPs come from the module's own estimate (`flops_per_token(seq_len)`: the Kaplan et al.
6·N + 6·L·T·H per token that the objectives already report), counted on non-padding tokens only,
so padding and recomputation (activation checkpointing) lower MFU, as they should. The peak comes
from `trainer.peak_flops` when set (any device, CPUs included), else from PEAK_FLOPS by
`torch.cuda.get_device_name()`; on anything else MFU is None — never a guessed peak.

Timing is per window of `trainer.log_every_n_steps` steps, with one device synchronisation per
window (not per step), so the numbers cost nothing measurable. The first step (warm-up, compile)
and the step after a validation are not timed. "Data wait" is the time between the end of one step
and the start of the next (fetching and moving the batch, plus Lightning's own between-step work,
a checkpoint save included), as a fraction of the timed wall time.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from lightning.pytorch import Callback

log = logging.getLogger(__name__)

TFLOPS = 1e12
# Peak dense (no structured sparsity) tensor-core FLOP/s per device, from the vendors' data sheets.
# Keys are lowercase substrings of torch.cuda.get_device_name(); the first that matches wins, so
# the more specific name comes first. Precisions: bf16/fp16 (mixed or true), tf32 (fp32 matmuls
# with torch.set_float32_matmul_precision("high"/"medium")), fp32 (plain CUDA cores).
PEAK_FLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    ("h200 nvl", {"bf16": 835.5 * TFLOPS, "fp16": 835.5 * TFLOPS, "tf32": 417.5 * TFLOPS, "fp32": 60.0 * TFLOPS}),
    ("h200", {"bf16": 989.5 * TFLOPS, "fp16": 989.5 * TFLOPS, "tf32": 494.7 * TFLOPS, "fp32": 66.9 * TFLOPS}),
    ("h100 nvl", {"bf16": 835.5 * TFLOPS, "fp16": 835.5 * TFLOPS, "tf32": 417.5 * TFLOPS, "fp32": 60.0 * TFLOPS}),
    ("h100 pcie", {"bf16": 756.5 * TFLOPS, "fp16": 756.5 * TFLOPS, "tf32": 378.0 * TFLOPS, "fp32": 51.2 * TFLOPS}),
    # "NVIDIA H100 80GB HBM3" is the SXM part.
    ("h100", {"bf16": 989.5 * TFLOPS, "fp16": 989.5 * TFLOPS, "tf32": 494.7 * TFLOPS, "fp32": 66.9 * TFLOPS}),
    ("a100", {"bf16": 312.0 * TFLOPS, "fp16": 312.0 * TFLOPS, "tf32": 156.0 * TFLOPS, "fp32": 19.5 * TFLOPS}),
    ("l40s", {"bf16": 362.05 * TFLOPS, "fp16": 362.05 * TFLOPS, "tf32": 183.0 * TFLOPS, "fp32": 91.6 * TFLOPS}),
    ("l4", {"bf16": 121.0 * TFLOPS, "fp16": 121.0 * TFLOPS, "tf32": 60.0 * TFLOPS, "fp32": 30.3 * TFLOPS}),
    # GeForce: fp16/bf16 with fp32 accumulation (what PyTorch's matmuls use) runs at half the
    # fp16-accumulate rate NVIDIA headlines (330 TFLOPS).
    ("rtx 4090", {"bf16": 165.2 * TFLOPS, "fp16": 165.2 * TFLOPS, "tf32": 82.6 * TFLOPS, "fp32": 82.6 * TFLOPS}),
)


def precision_kind(precision: str | int | None) -> str:
    """bf16 | fp16 | tf32 | fp32 for a Lightning `precision` value."""
    p = str(precision if precision is not None else "32-true")
    if p.startswith("bf16"):
        return "bf16"
    if p.startswith("16") or p.startswith("transformer-engine"):
        return "fp16"
    if p.startswith("64"):
        return "fp64"
    return "tf32" if torch.get_float32_matmul_precision() in ("high", "medium") else "fp32"


def table_peak_flops(device_name: str, precision: str | int | None) -> float | None:
    name = device_name.lower()
    kind = precision_kind(precision)
    for key, peaks in PEAK_FLOPS:
        if key in name:
            return peaks.get(kind)
    return None


def device_name(accelerator: str) -> str:
    """What the run trains on: the CUDA device's name, else the accelerator ('cpu', 'mps')."""
    if accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.cuda.current_device())
    return "cpu" if accelerator in ("auto", "gpu", "cuda") else accelerator


def peak_flops_per_device(name: str, precision: str | int | None, configured: float | None) -> float | None:
    """`trainer.peak_flops` when set, else the table's value for this GPU and precision, else None."""
    if configured:
        return float(configured)
    return table_peak_flops(name, precision)


def weights_digest(module: torch.nn.Module) -> int:
    """A 63-bit digest of every parameter's bytes (in name order): equal on every DDP replica
    exactly when the replicas hold identical weights."""
    h = hashlib.sha256()
    for name, p in sorted(module.state_dict().items()):
        if torch.is_tensor(p):
            h.update(name.encode())
            h.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return int.from_bytes(h.digest()[:8], "big") >> 1


@dataclass
class Totals:
    """Timed steps of one rank (the first step and the step after each validation left out)."""

    steps: int = 0
    samples: int = 0
    tokens: int = 0  # non-padding
    slots: int = 0  # B×T: tokens + padding
    flops: float = 0.0
    wall_s: float = 0.0  # end of the previous step → end of this one
    wait_s: float = 0.0  # end of the previous step → start of this one
    extra: dict = field(default_factory=dict)


class ThroughputMonitor(Callback):
    """Logs train/{tokens_per_s, samples_per_s, mfu, data_wait_fraction, padding_fraction} every
    `trainer.log_every_n_steps` steps and keeps run totals for summary.json (`summary()`).

    `flops_per_token(seq_len)` is the module's training FLOPs per non-padding token for batches of
    padded length `seq_len`; `peak_flops` is one device's peak (None: MFU is None)."""

    def __init__(self, flops_per_token: Callable[[int], float], peak_flops: float | None, device: str):
        self.flops_per_token = flops_per_token
        self.peak_flops = peak_flops
        self.device = device
        self.totals = Totals()
        self._window = Totals()
        self._last_end: float | None = None
        self._batch_start: float | None = None
        self._cuda = False
        self._pending: list[tuple[torch.Tensor, int, int]] = []  # (mask sum, slots, samples) not yet read
        self.world_size = 1

    # -- hooks --------------------------------------------------------------------------------
    def on_train_start(self, trainer, pl_module) -> None:
        self._cuda = pl_module.device.type == "cuda"
        self.world_size = int(trainer.world_size)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._batch_start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not isinstance(batch, dict) or "input_ids" not in batch:
            return  # a batch shape this monitor does not know: not timed
        ids = batch["input_ids"]
        mask = batch.get("attention_mask")
        # Kept as a device tensor: reading it now would synchronise every step.
        real = mask.sum() if mask is not None else torch.tensor(ids.numel())
        now = time.perf_counter()
        if self._last_end is not None and self._batch_start is not None:
            w = self._window
            w.steps += 1
            w.samples += int(ids.shape[0])
            w.slots += int(ids.numel())
            w.wall_s += now - self._last_end
            w.wait_s += max(0.0, self._batch_start - self._last_end)
            self._pending.append((real, int(ids.shape[-1]), int(ids.shape[0])))
        self._last_end = now
        if self._window.steps >= max(int(trainer.log_every_n_steps or 1), 1):
            self._close_window(trainer)

    def on_validation_start(self, trainer, pl_module) -> None:
        if trainer.training or trainer.state.fn == "fit":
            self._close_window(trainer)
            self._last_end = None  # the step after a validation is not timed

    def on_train_end(self, trainer, pl_module) -> None:
        self._close_window(trainer, log_metrics=False)

    # -- windows ------------------------------------------------------------------------------
    def _close_window(self, trainer, log_metrics: bool = True) -> None:
        w = self._window
        if w.steps == 0:
            return
        if self._cuda:
            torch.cuda.synchronize()  # once per window: the steps queued so far are done
            # the time the queued work took is charged to the window's last step
            now = time.perf_counter()
            w.wall_s += now - self._last_end
            self._last_end = now
        for real, seq_len, _ in self._pending:
            n = int(real)
            w.tokens += n
            w.flops += n * float(self.flops_per_token(seq_len))
        self._pending = []
        t = self.totals
        t.steps += w.steps
        t.samples += w.samples
        t.tokens += w.tokens
        t.slots += w.slots
        t.flops += w.flops
        t.wall_s += w.wall_s
        t.wait_s += w.wait_s
        if log_metrics and trainer.logger is not None:
            trainer.logger.log_metrics(self.rates(w), step=int(trainer.global_step))
        self._window = Totals()

    def rates(self, t: Totals, world_size: int = 1) -> dict[str, float]:
        """Per-second figures of `t` (`world_size` ranks' totals summed: tokens/s and samples/s are
        for the whole job, MFU per device)."""
        out: dict[str, float] = {}
        if t.wall_s <= 0 or t.steps == 0:
            return out
        # Ranks run in lock step: the job's wall time is one rank's.
        wall = t.wall_s / world_size
        out["train/tokens_per_s"] = t.tokens / wall
        out["train/samples_per_s"] = t.samples / wall
        out["train/data_wait_fraction"] = t.wait_s / t.wall_s
        if t.slots:
            out["train/padding_fraction"] = 1.0 - t.tokens / t.slots
        if self.peak_flops:
            out["train/mfu"] = t.flops / wall / (self.peak_flops * world_size)
        return out

    def summary(self, strategy=None) -> dict:
        """The run's figures for summary.json, summed over ranks when `strategy` is distributed
        (every rank must call it: it is a collective then)."""
        t = self.totals
        world_size = 1
        if strategy is not None and int(getattr(strategy, "world_size", 1)) > 1:
            world_size = int(strategy.world_size)
            packed = torch.tensor(
                [t.steps, t.samples, t.tokens, t.slots, t.flops, t.wall_s, t.wait_s],
                dtype=torch.float64,
                device=strategy.root_device,
            )
            packed = strategy.reduce(packed, reduce_op="sum").cpu().tolist()
            t = Totals(int(packed[0]), int(packed[1]), int(packed[2]), int(packed[3]), packed[4], packed[5], packed[6])
        rates = self.rates(t, world_size)
        return {
            "tokens_per_s": rates.get("train/tokens_per_s"),
            "samples_per_s": rates.get("train/samples_per_s"),
            "mfu": rates.get("train/mfu"),
            "data_wait_fraction": rates.get("train/data_wait_fraction"),
            "padding_fraction": rates.get("train/padding_fraction"),
            "peak_flops": self.peak_flops,
            "device": self.device,
            "world_size": world_size,
            "timed_steps": t.steps,
        }

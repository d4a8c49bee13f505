"""Live progress of a stage, as data: phase, step/total, epoch, latest metrics, speed and ETA,
written to `<run dir>/progress.json` (ptmlab.contracts.progress) for the worker to pick up.

`ProgressReporter` is the writer any stage uses for phases outside a Trainer (extracting
activations, measuring latency); `ProgressCallback` feeds it from a Lightning Trainer. Writes are
throttled (at most one every `every_s` seconds, plus every phase change and the end): the file is
for people watching, not a log.

Each history point also carries where it lies on the dashboard's other x-axes (ptmlab.contracts.progress
AXIS_KEYS): `epoch` (fractional: 1.5 is half-way through the second epoch), `time_s` (seconds since
the reporter started) and, for modules that count them (`tokens_seen`), `tokens`. Older progress
files lack them and are drawn against steps only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from ptmlab.contracts.progress import DEFAULT_SERIES, finite_metrics, thin_history, write_progress


class ProgressReporter:
    def __init__(self, run_dir: str | Path, *, enabled: bool = True, every_s: float = 1.0):
        self.run_dir = Path(run_dir)
        self.enabled = enabled  # False on DDP ranks other than 0
        self.every_s = every_s
        self.state: dict[str, Any] = {
            "phase": "starting",
            "step": 0,
            "total_steps": None,
            "epoch": None,
            "metrics": {},
            "steps_per_s": None,
            "eta_s": None,
            "history": [],
        }
        self._last_write = 0.0
        self._rate_from: tuple[float, int] | None = None  # (time, step) the speed is measured from
        # The training the next history points belong to: a job that trains more than once (a
        # distilled student, then its no-teacher control) draws one labelled curve per training.
        self.series = DEFAULT_SERIES
        self._started = time.monotonic()
        self._axes: dict[str, float] = {}  # the latest epoch and tokens given, stamped on every history point

    def start_series(self, name: str) -> None:
        """Later history points belong to the training `name` (its steps count from its own start)."""
        self.series = str(name)
        self._rate_from = None

    def phase(self, name: str, *, step: int | None = None, total: int | None = None) -> None:
        """A new phase; its own step count starts again when `total` is given."""
        self.state["phase"] = name
        if total is not None or step is not None:
            self.state.update(step=step or 0, total_steps=total, steps_per_s=None, eta_s=None)
            self._rate_from = None
        self.flush()

    def update(
        self,
        step: int,
        *,
        total: int | None = None,
        epoch: int | None = None,
        metrics: dict[str, Any] | None = None,
        force: bool = False,
        series: str | None = None,
        epoch_fraction: float | None = None,
        tokens: int | None = None,
    ) -> None:
        if series is not None and series != self.series:
            self.start_series(series)
        now = time.monotonic()
        if self._rate_from is None or step < self._rate_from[1]:
            self._rate_from = (now, step)
        state = self.state
        state["step"] = int(step)
        if total is not None:
            state["total_steps"] = int(total)
        if epoch is not None:
            state["epoch"] = int(epoch)
        if epoch_fraction is not None or epoch is not None:
            self._axes["epoch"] = round(float(epoch if epoch_fraction is None else epoch_fraction), 4)
        if tokens is not None:
            self._axes["tokens"] = int(tokens)
        t0, s0 = self._rate_from
        if step > s0 and now > t0:
            state["steps_per_s"] = round((step - s0) / (now - t0), 4)
            remaining = (state["total_steps"] or 0) - step
            state["eta_s"] = round(remaining / state["steps_per_s"], 1) if state["total_steps"] else None
        latest = finite_metrics(metrics or {})
        if latest:
            state["metrics"].update(latest)
            history = state["history"]
            axes = {**self._axes, "time_s": round(now - self._started, 2)}
            if history and history[-1]["step"] == step and history[-1].get("series") == self.series:
                history[-1].update(latest)
                for key, value in axes.items():
                    history[-1].setdefault(key, value)  # a validation at this step keeps the step's position
            else:
                history.append({"step": int(step), "series": self.series, **axes, **latest})
            state["history"] = thin_history(history)
        if force or now - self._last_write >= self.every_s:
            self.flush()

    def flush(self) -> None:
        if not self.enabled:
            return
        self._last_write = time.monotonic()
        try:
            write_progress(self.run_dir, self.state)
        except OSError:
            pass  # progress is advisory: a full disk fails the job elsewhere, with its own message


def _total_steps(trainer: pl.Trainer) -> int | None:
    total = trainer.estimated_stepping_batches
    if trainer.max_steps and trainer.max_steps > 0:
        total = min(total, trainer.max_steps) if total and total != float("inf") else trainer.max_steps
    return int(total) if total and total != float("inf") else None


class ProgressCallback(pl.Callback):
    """Training and validation progress of a Lightning fit, into a ProgressReporter."""

    def __init__(self, reporter: ProgressReporter, series: str = DEFAULT_SERIES):
        self.reporter = reporter
        self.series = series

    def on_train_start(self, trainer, pl_module) -> None:
        self.reporter.start_series(self.series)
        self.reporter.phase("training")
        self.reporter.update(trainer.global_step, total=_total_steps(trainer), epoch=trainer.current_epoch, force=True)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        # callback_metrics still hold the last validation's values: those are drawn once, at their step.
        metrics = {k: v for k, v in trainer.callback_metrics.items() if not str(k).startswith(("val/", "test/"))}
        if trainer.optimizers and "train/lr" not in metrics:  # modules that log none still show theirs
            metrics["lr"] = trainer.optimizers[0].param_groups[0]["lr"]
        batches = trainer.num_training_batches
        fraction = trainer.current_epoch + (batch_idx + 1) / batches if 0 < batches < float("inf") else None
        # Summed over ranks as if each saw rank 0's count: close enough for an x-axis (the summary has the exact sum).
        tokens = getattr(pl_module, "tokens_seen", None)
        tokens = tokens * trainer.world_size if isinstance(tokens, int) else None
        self.reporter.update(
            trainer.global_step, epoch=trainer.current_epoch, metrics=metrics, epoch_fraction=fraction, tokens=tokens
        )

    def on_validation_start(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self.reporter.state["phase"] = "validating"
            self.reporter.flush()

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        self.reporter.state["phase"] = "training"
        val = {k: v for k, v in trainer.callback_metrics.items() if str(k).startswith("val/")}
        self.reporter.update(trainer.global_step, metrics=val, force=True)

    def on_exception(self, trainer, pl_module, exception) -> None:
        # Stopped mid-training (a cancel, a study's pruner, a pre-emption: Lightning turns SIGTERM
        # into an exception at the next step): the steps it trained are written now, not up to
        # `every_s` stale. A study counts a pruned trial's steps from this file.
        self.reporter.update(trainer.global_step, force=True)

    def on_train_end(self, trainer, pl_module) -> None:
        self.reporter.update(trainer.global_step, metrics=dict(trainer.callback_metrics), force=True)
        self.reporter.phase("finishing")

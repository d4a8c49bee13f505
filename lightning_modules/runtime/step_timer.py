"""Wall time between consecutive training steps: a step's whole cost as the loop sees it (the
forward and backward pass, the optimizer, and the host work between steps). The benches compare
these gaps between ptmlab's Trainer (`StepTimer`), the Hugging Face Trainer and a plain loop
(`StepGaps.lap()` once a step)."""

from __future__ import annotations

import time

import lightning.pytorch as pl


class StepGaps:
    """Seconds between consecutive `lap()` calls, in `times`."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._last: float | None = None

    def lap(self) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.times.append(now - self._last)
        self._last = now


class StepTimer(StepGaps, pl.Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.lap()

"""Wall time between consecutive training-batch ends: a step's whole cost as the loop sees it (the
forward and backward pass, the optimizer, and the host work between steps). The benches compare
these gaps between ptmlab's Trainer and a plain loop."""

from __future__ import annotations

import time

import lightning.pytorch as pl


class StepTimer(pl.Callback):
    def __init__(self) -> None:
        self.times: list[float] = []
        self._last: float | None = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.times.append(now - self._last)
        self._last = now

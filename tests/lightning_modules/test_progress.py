"""Progress as data: a Lightning fit with ProgressCallback leaves progress.json with its phase,
step/total, epoch, latest loss and lr, speed, ETA and a metric history the job page can draw;
the history stays bounded on a long run."""

from __future__ import annotations

import json
import os
import signal

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.utilities.exceptions import SIGTERMException

from lightning_modules.runtime.progress import ProgressCallback, ProgressReporter
from ptmlab.contracts.progress import MAX_HISTORY, PROGRESS_FILE, read_progress


class Regression(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, _):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val/loss", torch.nn.functional.mse_loss(self.layer(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def loader(n=64):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    y = x.sum(dim=1, keepdim=True)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)


def test_a_fit_leaves_its_progress_with_steps_metrics_and_history(tmp_path):
    reporter = ProgressReporter(tmp_path, every_s=0.0)
    trainer = pl.Trainer(
        max_epochs=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
        callbacks=[ProgressCallback(reporter)],
    )
    trainer.fit(Regression(), loader(), loader(16))
    progress = read_progress(tmp_path)
    assert progress["phase"] == "finishing"
    assert progress["step"] == progress["total_steps"] == 24  # 3 epochs × 8 batches
    assert progress["epoch"] == 2 and progress["steps_per_s"] > 0 and progress["eta_s"] == 0
    assert {"train/loss", "val/loss", "lr"} <= set(progress["metrics"])
    history = progress["history"]
    assert [p["step"] for p in history] == sorted({p["step"] for p in history}) and history[-1]["step"] == 24
    losses = [p["train/loss"] for p in history if "train/loss" in p]
    assert len(losses) >= 20 and losses[-1] < losses[0]
    assert sum("val/loss" in p for p in history) == 3  # one point per validation
    # The other x-axes: the fractional epoch (8 batches an epoch) and seconds since the start.
    epochs = [p["epoch"] for p in history]
    assert epochs == sorted(epochs) and history[0]["epoch"] == 0.125 and epochs[-1] == 3.0
    assert all(p["time_s"] >= 0 for p in history) and "tokens" not in history[0]  # this module counts no tokens


def test_history_is_thinned_not_cut(tmp_path):
    reporter = ProgressReporter(tmp_path, every_s=3600)
    for step in range(1, 3 * MAX_HISTORY):
        reporter.update(step, total=3 * MAX_HISTORY, metrics={"train/loss": 1 / step, "note": "not a metric"})
    reporter.flush()
    history = json.loads((tmp_path / PROGRESS_FILE).read_text())["history"]
    assert len(history) <= MAX_HISTORY
    assert history[0]["step"] == 1 and history[-1]["step"] == 3 * MAX_HISTORY - 1  # the whole run, coarser
    assert all(set(p) == {"step", "time_s", "series", "train/loss"} for p in history)  # one training: one series


def test_a_disabled_reporter_writes_nothing(tmp_path):
    reporter = ProgressReporter(tmp_path, enabled=False, every_s=0.0)  # a DDP rank other than 0
    reporter.update(1, total=2, metrics={"train/loss": 1.0}, force=True)
    assert not (tmp_path / PROGRESS_FILE).exists()


def test_history_points_carry_epoch_wall_time_and_tokens(tmp_path):
    """Every point knows its fractional epoch and seconds since the start (the dashboard's other
    x-axes); tokens where the reporter is given them; a validation at a step keeps that step's position."""
    reporter = ProgressReporter(tmp_path, every_s=0.0)
    reporter.update(1, epoch=0, epoch_fraction=0.5, tokens=64, metrics={"train/loss": 2.0})
    reporter.update(2, epoch=0, epoch_fraction=1.0, tokens=128, metrics={"train/loss": 1.5})
    reporter.update(2, metrics={"val/loss": 1.7})
    reporter.update(3, epoch=1, metrics={"train/loss": 1.2})
    history = read_progress(tmp_path)["history"]
    assert [(p["step"], p["epoch"], p.get("tokens")) for p in history] == [(1, 0.5, 64), (2, 1.0, 128), (3, 1.0, 128)]
    assert history[1]["val/loss"] == 1.7 and all(p["time_s"] >= 0 for p in history)
    assert [p["time_s"] for p in history] == sorted(p["time_s"] for p in history)


class SigtermAt(Regression):
    """Sends itself SIGTERM at a training step, as the worker's cancel path does."""

    def __init__(self, step: int):
        super().__init__()
        self.step = step

    def training_step(self, batch, batch_idx):
        if self.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)
        return super().training_step(batch, batch_idx)


def test_a_fit_stopped_by_sigterm_leaves_the_steps_it_trained(tmp_path):
    # Throttled writes never come (every_s): only the forced ones. A study counts a pruned
    # trial's steps from this file, so the step it stopped at must be there, not the last
    # validation's (8).
    reporter = ProgressReporter(tmp_path, every_s=3600)
    trainer = pl.Trainer(
        max_epochs=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
        callbacks=[ProgressCallback(reporter)],
    )
    with pytest.raises(SIGTERMException):
        trainer.fit(SigtermAt(13), loader(), loader(16))
    assert trainer.global_step > 13
    assert read_progress(tmp_path)["step"] == trainer.global_step

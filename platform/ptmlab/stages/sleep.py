"""`stage=sleep`: sleeps `stage.seconds`, printing progress, then writes summary.json.

It exercises everything the platform does with a job (subprocess, logs, heartbeats, cancel,
requeue with resume, results) in a fraction of a second and without torch. Progress is kept in
`<run dir>/sleep_progress.json`, so a requeued job run with `resume=true` continues where the
previous attempt stopped, as a training stage continues from its last checkpoint.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ptmlab.contracts.progress import write_progress
from ptmlab.settings import Settings

PROGRESS_FILE = "sleep_progress.json"
TICK_S = 0.25


def _run_dir(cfg: DictConfig) -> Path:
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir)
    return Path(OmegaConf.select(cfg, "run_dir", default=".") or ".")


def _write_json(path: Path, data: dict) -> None:
    # Atomic: a job killed mid-write never leaves half a file for the worker (or a resume).
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)


class ValidationCurve:
    """`stage.validations` > 0: a made-up learning curve for the study tests, `val/score` rising
    to `stage.quality` over that many evenly spaced validations (the k-th of V reads
    quality * sqrt(k / V)), so a better configuration is better at every validation, as a pruner
    assumes. A resumed job recomputes the points it had already passed."""

    def __init__(self, validations: int, quality: float, ticks: int):
        self.validations, self.quality, self.ticks = validations, quality, ticks
        self.history: list[dict] = []
        self.latest: dict[str, float] = {}

    @classmethod
    def from_config(cls, cfg: DictConfig, ticks: int) -> ValidationCurve:
        return cls(
            int(OmegaConf.select(cfg, "stage.validations", default=0) or 0),
            float(OmegaConf.select(cfg, "stage.quality", default=0.5) or 0.0),
            ticks,
        )

    def at(self, tick: int) -> None:
        if self.validations <= 0:
            return
        reached = min(self.validations, tick * self.validations // max(self.ticks, 1))
        while len(self.history) < reached:
            k = len(self.history) + 1
            step = math.ceil(k * self.ticks / self.validations)
            self.latest = {"val/score": round(self.quality * math.sqrt(k / self.validations), 6)}
            self.history.append({"step": step, "series": "training", **self.latest})


def run_sleep(cfg: DictConfig) -> dict:
    started = time.time()
    run_dir = _run_dir(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    seconds = float(cfg.stage.seconds)
    progress_path = run_dir / PROGRESS_FILE
    done = 0.0
    if bool(OmegaConf.select(cfg, "resume", default=False)) and progress_path.exists():
        done = float(json.loads(progress_path.read_text()).get("slept_s", 0.0))
        print(f"sleep: resuming at {done:.2f}/{seconds:.2f} s", flush=True)
    resumed_from = done
    print(f"sleep: pid {os.getpid()} job {Settings().job_id or '-'} sleeping {seconds - done:.2f} s", flush=True)
    ticks = math.ceil(seconds / TICK_S - 1e-9)
    curve = ValidationCurve.from_config(cfg, ticks)
    while done < seconds:
        step = min(TICK_S, seconds - done)
        time.sleep(step)
        done += step
        _write_json(progress_path, {"slept_s": done})
        tick = round(done / TICK_S)
        # The same progress file a training stage writes (ptmlab.contracts.progress): one tick = one step.
        curve.at(tick)
        write_progress(
            run_dir,
            {
                "phase": "sleeping",
                "step": tick,
                "total_steps": ticks,
                "epoch": None,
                "metrics": dict(curve.latest),
                "steps_per_s": round(1 / TICK_S, 3),
                "eta_s": round(seconds - done, 2),
                "history": list(curve.history),
            },
        )
        print(f"sleep: {done:.2f}/{seconds:.2f} s", flush=True)
    if bool(cfg.stage.fail):
        raise RuntimeError("stage.fail=true: the sleep stage fails on purpose")
    if int(cfg.stage.exit_code):
        print(f"sleep: exiting with code {int(cfg.stage.exit_code)}", file=sys.stderr, flush=True)
        sys.exit(int(cfg.stage.exit_code))
    summary = {
        "stage": str(cfg.stage.name),
        "mlflow_run_id": None,  # this stage logs nothing to MLflow
        "run_dir": str(run_dir),
        "seed": int(cfg.seed),
        "wall_time_s": round(time.time() - started, 3),
        "seconds": seconds,
        "resumed_from_s": resumed_from,
        "job_id": Settings().job_id,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    size_bytes = OmegaConf.select(cfg, "stage.size_bytes", default=None)
    if size_bytes is not None:  # a made-up compressed model: its score and its size (study tests)
        summary["score"] = float(OmegaConf.select(cfg, "stage.quality", default=0.5))
        summary["size_bytes"] = int(size_bytes)
    if bool(OmegaConf.select(cfg, "stage.break_summary", default=False)):
        summary["seconds"] = "not a number"
    _write_json(run_dir / "summary.json", summary)
    return summary

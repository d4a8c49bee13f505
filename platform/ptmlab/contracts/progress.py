"""A running stage's progress: the small file the science half writes in its run folder and the
worker reads at each heartbeat (DESIGN.md §2). Neither side knows the other: this module is the
whole contract.

`progress.json` = {phase, step, total_steps, epoch, metrics (the latest value of each),
steps_per_s, eta_s, updated_at, history: [{"step": s, "<metric>": value, ...}]}. The history keeps
every logged point up to MAX_HISTORY points, then every other one (a long run's curve keeps its
shape at a bounded size). Written atomically (a reader never sees half a file); a file that does
not parse is ignored, never an error: progress is advisory, the summary and MLflow are the record.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

PROGRESS_FILE = "progress.json"
MAX_HISTORY = 400
# Keys shown as a job's latest numbers and drawn as curves: losses, learning rate, task metrics.
METRIC_PREFIXES = ("train/", "val/", "test/", "lr")
# Running totals grow without bound and say nothing a curve should show (the summary has them).
COUNTERS = ("tokens_seen", "samples_seen", "flops")


def write_progress(run_dir: str | Path, data: dict[str, Any]) -> None:
    path = Path(run_dir) / PROGRESS_FILE
    tmp = path.with_name(f".{PROGRESS_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**data, "updated_at": time.time()}, allow_nan=False, default=str))
    tmp.replace(path)


def read_progress(run_dir: str | Path) -> dict[str, Any] | None:
    try:
        data = json.loads((Path(run_dir) / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def finite_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The metrics worth showing: numbers under METRIC_PREFIXES, finite, rounded for the eye."""
    out = {}
    for key, value in metrics.items():
        if not key.startswith(METRIC_PREFIXES) or key.endswith(COUNTERS):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out[key] = float(f"{number:.6g}")
    return out


def thin_history(history: list[dict[str, Any]], limit: int = MAX_HISTORY) -> list[dict[str, Any]]:
    """Every other point once `limit` is reached; the newest point is always kept."""
    if len(history) <= limit:
        return history
    return [*history[:-1][::2], history[-1]]


def split_for_listing(progress: dict[str, Any] | None) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(latest numbers without the history, the history): job lists carry only the first."""
    if not progress:
        return None, []
    latest = {k: v for k, v in progress.items() if k != "history"}
    history = progress.get("history") if isinstance(progress.get("history"), list) else []
    return latest, history

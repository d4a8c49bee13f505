"""A running stage's progress: the small file the science half writes in its run folder and the
worker reads at each heartbeat (DESIGN.md §2). Neither side knows the other: this module is the
whole contract.

`progress.json` = {phase, step, total_steps, epoch, metrics (the latest value of each),
steps_per_s, eta_s, updated_at, history: [{"step": s, "series": name, "<metric>": value, ...}]}.
A history point may also carry its other x-axis positions (AXIS_KEYS: fractional `epoch`, `time_s`
since the stage started, `tokens` seen); files written before they existed have steps only.
`series` names the training a point belongs to: a job that trains more than once (a distilled
student and its no-teacher control, recovery fine-tuning after pruning, QAT) counts each training's
steps from its own start, so its history is several curves, not one (`history_series`). The history
keeps every logged point up to MAX_HISTORY points, then every other one (a long run's curve keeps
its shape at a bounded size; each series keeps its first and last point, and the validation points
are kept while they are under half of it: a study counts a trial's validations from the history,
ptmlab.studies.objective). Written atomically (a reader never sees half a file); a file that does
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
# What a history point holds besides its metrics: where it lies on each x-axis the dashboard offers.
AXIS_KEYS = ("step", "epoch", "time_s", "tokens")


DEFAULT_SERIES = "training"
# How the job page names a training (a compression loop's series is its metric prefix, see
# lightning_modules/compression/base.py `train_epochs`); an unknown name is shown as it is.
SERIES_LABELS = {
    "training": "training",
    "distill": "student (distillation)",
    "control": "control run",  # the same training without the compression (distill: without the teacher)
    "recovery": "recovery fine-tuning",
    "qat": "quantization-aware training",
    "theseus": "Theseus module replacing",
}


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


def is_validation_point(point: dict[str, Any]) -> bool:
    return any(str(key).startswith("val/") for key in point)


def thin_history(history: list[dict[str, Any]], limit: int = MAX_HISTORY) -> list[dict[str, Any]]:
    """Every other point once `limit` is reached; the newest point and the first and last point of
    every series (so no training's curve loses its start or end) are always kept, and so is every
    validation point while they are fewer than half of `limit`. A study numbers a trial's
    validations by their order in the history: a fine-tune of more steps than `limit` logs a point
    per step, and dropping validations with them would hand its pruner the wrong curve."""
    if len(history) <= limit:
        return history
    last = len(history) - 1
    keep_validations = sum(map(is_validation_point, history)) < limit // 2
    return [
        p
        for i, p in enumerate(history)
        if i % 2 == 0
        or i == last
        or p.get("series") != history[i - 1].get("series")
        or p.get("series") != history[i + 1].get("series")
        or (keep_validations and is_validation_point(p))
    ]


def history_series(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as one series per training: [{"name", "label", "points": [{"step", metrics}]}].

    A new series starts where the `series` name changes, or where the step goes back (a second
    training under the same name, or a history written before points carried a name); a name seen
    again is numbered ("training (2)")."""
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    current: dict[str, Any] | None = None
    last_step = None
    for point in history:
        if not isinstance(point, dict):
            continue
        name = str(point.get("series") or DEFAULT_SERIES)
        step = point.get("step")
        went_back = isinstance(step, int | float) and last_step is not None and step < last_step
        if current is None or name != current["name"] or went_back:
            seen[name] = seen.get(name, 0) + 1
            label = SERIES_LABELS.get(name, name)
            current = {"name": name, "label": label if seen[name] == 1 else f"{label} ({seen[name]})", "points": []}
            out.append(current)
        current["points"].append({k: v for k, v in point.items() if k != "series"})
        last_step = step if isinstance(step, int | float) else last_step
    return out


def split_for_listing(progress: dict[str, Any] | None) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(latest numbers without the history, the history): job lists carry only the first."""
    if not progress:
        return None, []
    latest = {k: v for k, v in progress.items() if k != "history"}
    history = progress.get("history") if isinstance(progress.get("history"), list) else []
    return latest, history

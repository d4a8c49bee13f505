"""Prediction files: one TSV per scored/predicted split, and GLUE submission files.

GLUE's server takes `<TASK>.tsv` files (CoLA.tsv, MNLI-m.tsv, MNLI-mm.tsv, STS-B.tsv, ...) with
a header `index<TAB>prediction`, the test file's index and the label as it appears in the
training files (0/1, `entailment`, or a score for STS-B).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lightning_modules.data.task_data import Split
from lightning_modules.tasks.spec import TaskSpec
from ptmlab.contracts import ConfigError


def prediction_values(preds, spec: TaskSpec) -> list[str]:
    """Predictions as the file values GLUE expects: the raw label, or a score with 3 decimals.
    Classification `preds` are class indices or B×C logits."""
    arr = np.asarray(preds.detach().cpu() if hasattr(preds, "detach") else preds)
    if spec.is_regression:
        return [f"{float(v):.3f}" for v in arr.reshape(-1)]
    if arr.ndim == 2:
        arr = arr.argmax(axis=-1)
    return [spec.labels[int(i)] for i in arr.reshape(-1)]


def write_predictions(path: str | Path, split: Split, preds: Sequence, spec: TaskSpec) -> Path:
    """`index, prediction[, label]` for every example of the split, in file order."""
    values = prediction_values(preds, spec)
    if len(values) != len(split.examples):
        raise ValueError(f"{len(values)} predictions for {len(split.examples)} examples of {split.name}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\", lineterminator="\n")
        w.writerow(["index", "prediction"] + (["label"] if split.has_labels else []))
        for ex, value in zip(split.examples, values, strict=True):
            row = [ex.id, value]
            if split.has_labels:
                row.append(f"{ex.label:.3f}" if spec.is_regression else spec.labels[int(ex.label)])
            w.writerow(row)
    return path


def write_glue_submission(folder: str | Path, split: Split, preds: Sequence, spec: TaskSpec) -> Path:
    """The GLUE-server file for a test split, named by `task.submission_files`."""
    name = spec.submission_files.get(split.name)
    if name is None:
        raise ConfigError(f"task.submission_files has no file name for split '{split.name}' of task {spec.name}")
    values = prediction_values(preds, spec)
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        f.write("index\tprediction\n")
        for ex, value in zip(split.examples, values, strict=True):
            f.write(f"{ex.id}\t{value}\n")
    return path

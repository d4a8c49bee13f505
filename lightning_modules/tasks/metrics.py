"""Task metrics exactly as GLUE defines them, computed with torchmetrics (Matthews correlation
with scikit-learn, see below).

  CoLA                          matthews_correlation
  SST-2, QNLI, RTE, WNLI, MNLI  accuracy (MNLI: on dev_matched `accuracy`, dev_mismatched `accuracy_mm`)
  MRPC, QQP                     f1 (binary, positive class 1) and accuracy
  STS-B                         pearson and spearmanr

Names follow Hugging Face `evaluate`'s glue metric. The GLUE score (mean over tasks, a
two-metric task contributing the mean of its two) lives torch-free in `ptmlab.contracts.glue` and
is re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from sklearn.metrics import matthews_corrcoef
from torchmetrics.functional import mean_absolute_error, mean_squared_error, pearson_corrcoef, spearman_corrcoef
from torchmetrics.functional.classification import binary_f1_score, multiclass_accuracy, multiclass_f1_score

from ptmlab.contracts import ConfigError
from ptmlab.contracts.glue import glue_average, glue_task_score  # noqa: F401 - re-exported

CLASSIFICATION_METRICS = ("accuracy", "f1", "macro_f1", "matthews_correlation")
REGRESSION_METRICS = ("pearson", "spearmanr", "mse", "mae")


def _as_tensor(x, dtype) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().to(dtype)
    return torch.as_tensor(np.asarray(x), dtype=dtype)


def compute_metrics(names: Sequence[str], predictions, labels, *, num_labels: int | None = None) -> dict[str, float]:
    """Metric name -> value. Classification `predictions` are class indices (B) or logits (B×C,
    argmax taken); regression predictions are scores (B, or B×1)."""
    names = list(names)
    if not names:
        return {}
    regression = names[0] in REGRESSION_METRICS
    if regression:
        preds = _as_tensor(predictions, torch.float64).reshape(-1)
        target = _as_tensor(labels, torch.float64).reshape(-1)
    else:
        preds = _as_tensor(predictions, torch.float64)
        if preds.ndim == 2:  # B×C logits -> B class indices
            preds = preds.argmax(dim=-1)
        preds = preds.to(torch.long).reshape(-1)
        target = _as_tensor(labels, torch.long).reshape(-1)
        num_labels = int(num_labels or max(int(preds.max()), int(target.max()), 1) + 1)
    if preds.numel() != target.numel():
        raise ValueError(f"{preds.numel()} predictions for {target.numel()} labels")
    out: dict[str, float] = {}
    for name in names:
        if name == "accuracy":
            value = multiclass_accuracy(preds, target, num_classes=num_labels, average="micro")
        elif name == "f1":
            if num_labels != 2:
                raise ConfigError(
                    f"metric f1 is binary F1 (MRPC, QQP) but the task has {num_labels} labels; "
                    f"use macro_f1 (task.metrics)"
                )
            value = binary_f1_score(preds, target)
        elif name == "macro_f1":
            value = multiclass_f1_score(preds, target, num_classes=num_labels, average="macro")
        elif name == "matthews_correlation":
            # scikit-learn, as GLUE's own scorer: 0 for a constant predictor. torchmetrics (1.9)
            # returns a non-zero limit value there (0.18 on 5:3 labels), which would hide the
            # degenerate runs the leaderboard flags.
            value = matthews_corrcoef(target.numpy(), preds.numpy())
        elif name == "pearson":
            value = pearson_corrcoef(preds, target)
        elif name == "spearmanr":
            # Undefined on a constant input: NaN, as scipy (torchmetrics would say 0.0).
            constant = preds.unique().numel() == 1 or target.unique().numel() == 1
            value = float("nan") if constant else spearman_corrcoef(preds, target)
        elif name == "mse":
            value = mean_squared_error(preds, target)
        elif name == "mae":
            value = mean_absolute_error(preds, target)
        else:
            raise ConfigError(
                f"unknown metric '{name}' (task.metrics); valid: "
                f"{', '.join(CLASSIFICATION_METRICS + REGRESSION_METRICS)}"
            )
        out[name] = float(value)
    return out


def prediction_stats(predictions, labels) -> dict:
    """What the leaderboard needs to flag a degenerate run: did the model predict one class only,
    and what accuracy would always predicting the majority class give? (classification only)"""
    preds = _as_tensor(predictions, torch.float64)
    if preds.ndim == 2:
        preds = preds.argmax(dim=-1)
    preds = preds.to(torch.long).reshape(-1)
    target = _as_tensor(labels, torch.long).reshape(-1)
    counts = torch.bincount(target)
    return {
        "constant_prediction": bool(preds.unique().numel() == 1),
        "majority_rate": float(counts.max()) / max(int(target.numel()), 1),
        "predicted_classes": int(preds.unique().numel()),
    }

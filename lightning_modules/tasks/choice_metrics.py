"""Multiple-choice metrics and prediction files, from the B×N choice scores of a split (in split
order; -inf where an example has fewer choices than the widest).

    accuracy       the right choice has the highest score (lm-evaluation-harness `acc`)
    accuracy_norm  log-likelihood scoring only: the highest score divided by the choice's length in
                   characters (Python `len` of the choice text, without the space that joins it to
                   the context), as lm-evaluation-harness's `acc_norm` (`completion_len =
                   len(choice)`); its byte-length variant is not computed

Accuracy is torchmetrics' (tasks/metrics.py `compute_metrics`) on the argmax.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from lightning_modules.data.task_data import Split
from lightning_modules.tasks.metrics import compute_metrics
from lightning_modules.tasks.spec import TaskSpec

NORMALISATION = "characters"  # what accuracy_norm divides by (the summary says it)


def normalised_scores(split: Split, scores: torch.Tensor) -> torch.Tensor:
    """B×N summed log-likelihoods divided by each choice's length in characters (padding stays -inf)."""
    lengths = torch.ones_like(scores, dtype=torch.float64)
    for i, ex in enumerate(split.examples):
        lengths[i, : len(ex.choices)] = torch.tensor([float(len(c)) for c in ex.choices], dtype=torch.float64)
    return scores.double() / lengths


def choice_metrics(spec: TaskSpec, split: Split, scores: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    scores = scores.detach().cpu()
    width = scores.size(-1)
    values = compute_metrics(list(spec.metrics), scores.argmax(-1), labels, num_labels=width)
    if spec.choice_scoring == "log_likelihood":
        values["accuracy_norm"] = compute_metrics(
            ["accuracy"], normalised_scores(split, scores).argmax(-1), labels, num_labels=width
        )["accuracy"]
    return values


def write_choice_predictions(path: str | Path, split: Split, scores: torch.Tensor, spec: TaskSpec) -> Path:
    """One JSON line per example, in file order: id, the chosen index, every choice's score (and,
    with log-likelihood scoring, the length-normalised scores and their choice), the gold index."""
    scores = scores.detach().cpu().double()
    norm = normalised_scores(split, scores) if spec.choice_scoring == "log_likelihood" else None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for i, ex in enumerate(split.examples):
            n = len(ex.choices)
            row = {"id": ex.id, "prediction": int(scores[i, :n].argmax()), "scores": scores[i, :n].tolist()}
            if norm is not None:
                row.update(prediction_norm=int(norm[i, :n].argmax()), scores_norm=norm[i, :n].tolist())
            if split.has_labels:
                row["label"] = ex.label
            f.write(json.dumps(row) + "\n")
    return path

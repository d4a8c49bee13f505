"""MultiRC's official metrics (Khashabi et al. 2018; the SuperGLUE scorer), over answer options
classified true/false one by one:

  f1a          binary F1 of the true class over every answer option of the split (torchmetrics;
               0 when no option is true and none is predicted true, as scikit-learn's default)
  exact_match  the share of questions whose options are all classified right (grouped here by
               each option's `group`, the question; groups need not be contiguous)

A task's score on the SuperGLUE leaderboard is the mean of the two (ptmlab.contracts.superglue).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torchmetrics.functional.classification import binary_f1_score

ANSWER_OPTION_METRICS = ("f1a", "exact_match")


def class_indices(predictions) -> torch.Tensor:
    """B class indices from B indices or B×2 logits."""
    preds = torch.as_tensor(predictions).detach().cpu()
    return (preds.argmax(dim=-1) if preds.ndim == 2 else preds).to(torch.long).reshape(-1)


def question_exact_match(predictions: torch.Tensor, labels: torch.Tensor, groups: Sequence[str]) -> float:
    """Mean over groups of 1 when every option of the group is right, else 0."""
    right: dict[str, bool] = {}
    for correct, group in zip((predictions == labels).tolist(), groups, strict=True):
        right[group] = right.get(group, True) and correct
    return sum(right.values()) / len(right)


def answer_option_metrics(names: Sequence[str], predictions, labels, groups: Sequence[str | None]) -> dict[str, float]:
    preds, target = class_indices(predictions), torch.as_tensor(labels).to(torch.long).reshape(-1)
    if not (len(preds) == len(target) == len(groups)):
        raise ValueError(f"{len(preds)} predictions, {len(target)} labels and {len(groups)} groups")
    if "exact_match" in names and None in groups:
        raise ValueError("exact_match needs every example's group (its question)")
    out = {}
    for name in names:
        if name == "f1a":
            out[name] = float(binary_f1_score(preds, target))
        elif name == "exact_match":
            out[name] = question_exact_match(preds, target, groups)
        else:
            raise ValueError(f"{name} is not an answer-option metric ({', '.join(ANSWER_OPTION_METRICS)})")
    return out

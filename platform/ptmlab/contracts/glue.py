"""GLUE's task table and scoring (torch-free, shared): the leaderboard and the science half's
metrics compute the GLUE score of a task and the GLUE average the same way."""

from __future__ import annotations

# task -> (display name, the metrics whose mean is the task's GLUE score). Kept in step with
# conf/task/glue/*.yaml `glue_metrics` (tests/platform/test_leaderboard.py checks it).
GLUE_TASKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "cola": ("CoLA", ("matthews_correlation",)),
    "sst2": ("SST-2", ("accuracy",)),
    "mrpc": ("MRPC", ("f1", "accuracy")),
    "stsb": ("STS-B", ("pearson", "spearmanr")),
    "qqp": ("QQP", ("f1", "accuracy")),
    "mnli": ("MNLI", ("accuracy", "accuracy_mm")),
    "qnli": ("QNLI", ("accuracy",)),
    "rte": ("RTE", ("accuracy",)),
    "wnli": ("WNLI", ("accuracy",)),
}


def glue_task_score(task: str, metrics: dict[str, float]) -> float | None:
    """Mean of the task's GLUE metrics that are present (MNLI on a layout without a mismatched
    dev file has matched accuracy only); None when none is."""
    names = GLUE_TASKS[task][1] if task in GLUE_TASKS else ()
    values = [float(metrics[m]) for m in names if metrics.get(m) is not None]
    return sum(values) / len(values) if values else None


def glue_average(task_scores: dict[str, float | None]) -> float | None:
    """Unweighted mean of the GLUE task scores present (non-GLUE tasks are ignored)."""
    values = [float(v) for t, v in task_scores.items() if t in GLUE_TASKS and v is not None]
    return sum(values) / len(values) if values else None

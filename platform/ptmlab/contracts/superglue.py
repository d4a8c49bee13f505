"""SuperGLUE's task table and scoring (torch-free, shared), and the benchmarks the leaderboard
averages over (GLUE, SuperGLUE).

A task's SuperGLUE score is the mean of its metrics as the official leaderboard shows them (CB:
accuracy and macro-F1; MultiRC: F1a and exact match); the SuperGLUE average is the unweighted mean
of the task scores present. ReCoRD and the diagnostics (AX-b, AX-g) are not in ptmlab's data, so a
ptmlab average is over at most these seven tasks (the count is always shown beside it). Task names
are the `name` of conf/task/superglue/*.yaml; RTE is `superglue_rte`, apart from GLUE's `rte`
(different training data) so each run counts in one benchmark only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptmlab.contracts.glue import GLUE_TASKS

# task -> (display name, the metrics whose mean is its score). Kept in step with
# conf/task/superglue/*.yaml `superglue_metrics` (tests/lightning_modules/test_superglue.py checks it).
# COPA (a multiple-choice task, accuracy) counts once its runs exist.
SUPERGLUE_TASKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "boolq": ("BoolQ", ("accuracy",)),
    "cb": ("CB", ("accuracy", "macro_f1")),
    "copa": ("COPA", ("accuracy",)),
    "multirc": ("MultiRC", ("f1a", "exact_match")),
    "superglue_rte": ("RTE", ("accuracy",)),
    "wic": ("WiC", ("accuracy",)),
    "wsc": ("WSC", ("accuracy",)),
}


@dataclass(frozen=True)
class Benchmark:
    name: str  # as `ptmlab results <name>` spells it
    display_name: str
    tasks: dict[str, tuple[str, tuple[str, ...]]]  # task -> (display name, scored metrics)

    def task_score(self, task: str, metrics: dict[str, float]) -> float | None:
        """Mean of the task's scored metrics that are present; None when none is (or not its task)."""
        names = self.tasks[task][1] if task in self.tasks else ()
        values = [float(metrics[m]) for m in names if metrics.get(m) is not None]
        return sum(values) / len(values) if values else None

    def average(self, task_scores: dict[str, float | None]) -> float | None:
        """Unweighted mean of the benchmark's task scores present (other tasks are ignored)."""
        values = [float(v) for t, v in task_scores.items() if t in self.tasks and v is not None]
        return sum(values) / len(values) if values else None


BENCHMARKS: dict[str, Benchmark] = {
    "glue": Benchmark("glue", "GLUE", GLUE_TASKS),
    "superglue": Benchmark("superglue", "SuperGLUE", SUPERGLUE_TASKS),
}


def benchmark_of(task: str) -> Benchmark | None:
    """The benchmark a task name scores in (task names are unique across benchmarks)."""
    return next((b for b in BENCHMARKS.values() if task in b.tasks), None)

"""The benchmarks the leaderboard groups results by (torch-free, shared): one table, BENCHMARKS.

A benchmark holds tasks in one of two ways:
- by name (GLUE, SuperGLUE): a fixed task table, each task scored by the mean of its metrics, and the
  benchmark's average over its tasks present (ptmlab.contracts.glue, ptmlab.contracts.superglue);
- by task kind ("tasks": span extraction, token classification, multiple choice; "generation"):
  any task of those kinds whatever its name (`task=ner` on a user's files as well as `task=ner/wnut17`),
  its columns the kind's metrics a run has, scored by the run's own main metric. These benchmarks
  have no average: a mean of SQuAD F1, entity F1 and accuracy, or of BLEU and ROUGE, measures nothing.
A named task belongs to its table only (COPA is SuperGLUE's, though multiple choice), so each run
counts in one benchmark.

Scores are on ptmlab's 0-1 scale everywhere but generation: sacreBLEU and rouge-score values are
stored 0-100 (lightning_modules/tasks/generation_metrics.py), so the kind says to divide them by 100
when the leaderboard reads them, and every board renders 0-100 the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ptmlab.contracts.glue import GLUE_TASKS
from ptmlab.contracts.superglue import SUPERGLUE_TASKS


@dataclass(frozen=True)
class KindColumns:
    """What a task kind shows on its board: these metrics, in this order, where a run has them."""

    metrics: tuple[str, ...]
    stored_scale: float = 1.0  # a stored value ÷ this is on the 0-1 scale


# task.kind -> its columns. Kept in step with the kinds' `metrics` in conf/task (seq2seq.yaml, ner.yaml,
# squad.yaml, multiple_choice.yaml); strict-mode entity scores and length_ratio stay on the job page.
KIND_COLUMNS: dict[str, KindColumns] = {
    "span_extraction": KindColumns(("exact_match", "f1")),
    "token_classification": KindColumns(("entity_f1", "token_accuracy")),
    "multiple_choice": KindColumns(("accuracy", "accuracy_norm")),
    "generation": KindColumns(("bleu", "chrf", "rouge1", "rouge2", "rougeL", "rougeLsum"), stored_scale=100.0),
}


@dataclass(frozen=True)
class Benchmark:
    name: str  # as `ptmlab results <name>` and `?benchmark=` spell it
    display_name: str
    tasks: dict[str, tuple[str, tuple[str, ...]]] = field(
        default_factory=dict
    )  # task -> (display name, scored metrics)
    kinds: tuple[str, ...] = ()  # task kinds it holds whatever the task's name (KIND_COLUMNS)
    every_task: bool = False  # its board shows other benchmarks' tasks too, outside its average (GLUE's)

    @property
    def averaged(self) -> bool:
        return bool(self.tasks)

    def holds(self, task: str, kind: str | None) -> bool:
        return benchmark_of(task, kind) is self

    def task_score(self, task: str, metrics: dict[str, float]) -> float | None:
        """Mean of the task's scored metrics that are present; None when none is (or not its task)."""
        names = self.tasks[task][1] if task in self.tasks else ()
        values = [float(metrics[m]) for m in names if metrics.get(m) is not None]
        return sum(values) / len(values) if values else None

    def average(self, task_scores: dict[str, float | None]) -> float | None:
        """Unweighted mean of the benchmark's task scores present (other tasks are ignored); None for
        a benchmark without an average."""
        values = [float(v) for t, v in task_scores.items() if t in self.tasks and v is not None]
        return sum(values) / len(values) if values else None

    def description(self) -> str:
        """What its board holds, for messages: "SuperGLUE tasks", "tasks of kind generation"."""
        return f"{self.display_name} tasks" if self.tasks else f"tasks of kind {', '.join(self.kinds)}"


BENCHMARKS: dict[str, Benchmark] = {
    "glue": Benchmark("glue", "GLUE", GLUE_TASKS, every_task=True),
    "superglue": Benchmark("superglue", "SuperGLUE", SUPERGLUE_TASKS),
    "tasks": Benchmark(
        "tasks", "Tasks (QA, tagging, choice)", kinds=("span_extraction", "token_classification", "multiple_choice")
    ),
    "generation": Benchmark("generation", "Generation", kinds=("generation",)),
}


def benchmark_of(task: str, kind: str | None = None) -> Benchmark | None:
    """The benchmark a task scores in: the table that names it (task names are unique across
    benchmarks), else the one that holds its kind."""
    named = next((b for b in BENCHMARKS.values() if task in b.tasks), None)
    return named or next((b for b in BENCHMARKS.values() if kind is not None and kind in b.kinds), None)


def summary_task_kind(summary: Mapping[str, Any]) -> str | None:
    """A finetune summary's task kind: `task_kind`, or for a row written before that field, what
    only a run of that kind records (the generation numbers, the choice scoring, the SQuAD
    no-answer threshold, the seqeval modes); None for classification and regression."""
    if summary.get("task_kind"):
        return str(summary["task_kind"])
    if isinstance(summary.get("generation"), dict):
        return "generation"
    if isinstance(summary.get("multiple_choice"), dict):
        return "multiple_choice"
    if "no_answer_threshold" in summary:
        return "span_extraction"
    modes = summary.get("metric_modes")
    if isinstance(modes, dict) and "token_accuracy" in modes:
        return "token_classification"
    return None

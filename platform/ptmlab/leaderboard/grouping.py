"""The GLUE leaderboard's grouping: finetune and multi-task results grouped by configuration,
mean ± std over seeds. Torch-free (the API and the dashboard use it).

Input is results rows (`ptmlab.results.ResultRow`, oldest first, as `load_rows`/`read_rows`
return them); each row is read once into typed task runs (`TaskRun`: the row's id, its task, its
metrics, seed and identity), which is all the grouping reads; the renderers
(ptmlab.leaderboard.rendering) read the grouped `Leaderboard`. A bare summary dict stands for a
row not stored: it has no result id.

Per run, a GLUE task's score is the mean of its GLUE metrics (MRPC/QQP: F1 and accuracy; STS-B:
Pearson and Spearman; MNLI: matched and mismatched accuracy), then per configuration the mean
over seeds; the GLUE average is the unweighted mean of those task scores over the GLUE tasks the
configuration has (the count is shown: averages over different task sets do not compare). Numbers
are shown on GLUE's 0-100 scale. Non-GLUE tasks (SentEval, tabular) get a column, scored by the
run's main metric, and stay out of the GLUE average. The same board averages another benchmark
(`benchmark="superglue"`, ptmlab.contracts.superglue): its tasks scored by its metrics (CB: mean of
accuracy and macro-F1; MultiRC: of F1a and exact match), its average over them; a SuperGLUE task
on the GLUE board is scored the same way and stays out of the GLUE average. The "tasks" and
"generation" boards hold tasks by their kind (ptmlab.contracts.benchmarks: SQuAD EM/F1, entity F1 and
token accuracy, multiple-choice accuracy; BLEU, chrF, ROUGE-1/2/L/Lsum, read from their 0-100 scale):
one column per task, scored by its run's main metric, no average.

Beside the scores, each row reports its footprint (`Footprint`): trainable and total parameters and
the size of what a task stores beside the shared backbone (`delta_params`, `delta_bytes`: LoRA's
A/B matrices and the head; every parameter for full fine-tuning), mean over the row's runs. Rows
can be restricted to some adaptation modes (`adaptations`, `parse_adaptation_filter`).

Degenerate runs are flagged, not hidden: a CoLA Matthews correlation of exactly 0 (what a
constant predictor gets), constant predictions recorded in `prediction_stats` (accuracy then
equals the majority-class rate), or a NaN metric.

Grouping never hides a run. A run is identified by its resolved config's hash (`config_hash`, see
ptmlab.contracts.identity) plus its seed, not by the displayed `group_by` keys: only a later run
of the same config and seed replaces an earlier one (a re-run). Runs of different configs that the
grouping puts in one cell with the same seed are all counted (`n` is the number of runs shown) and
the cell says so (`same_seed_runs`, a flag). Multi-task runs (`stage=multitask`) give one cell per
task they trained, counted in `multitask_runs` and marked in every rendering.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ptmlab.contracts.benchmarks import BENCHMARKS, KIND_COLUMNS, Benchmark, benchmark_of, summary_task_kind

# GLUE's and SuperGLUE's task tables and scoring live in ptmlab.contracts, shared with the science half.
from ptmlab.contracts.glue import GLUE_TASKS  # noqa: F401 - re-exported
from ptmlab.contracts.summaries import FinetuneSummary, read_stored_summary
from ptmlab.errors import ConfigError, NotFoundError
from ptmlab.results import ResultRow, row_params
from ptmlab.sizes import size_text

METRIC_ABBREV = {
    "matthews_correlation": "mcc",
    "accuracy": "acc",
    "accuracy_mm": "acc_mm",
    "f1": "f1",
    "pearson": "pearson",
    "spearmanr": "spearman",
    "macro_f1": "macro_f1",
    "f1a": "f1a",
    "exact_match": "em",
    "entity_f1": "entity_f1",
    "token_accuracy": "token_acc",
    "accuracy_norm": "acc_norm",
    "bleu": "BLEU",
    "chrf": "chrF",
    "rouge1": "R-1",
    "rouge2": "R-2",
    "rougeL": "R-L",
    "rougeLsum": "R-Lsum",
}
DEFAULT_GROUP_BY = ("model", "objective", "adaptation")
# The result kinds the leaderboard reads: single-task fine-tunes and multi-task runs.
LEADERBOARD_KINDS = ("finetune", "multitask")
MISSING = "—"  # a footprint older runs did not record
MODE_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _sample_std(values: Sequence[float]) -> float:
    """Sample standard deviation in floats: statistics.stdev computes in exact fractions, which
    dominated the leaderboard's time at 10,000 results."""
    mean = statistics.fmean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


@dataclass
class Stat:
    mean: float | None
    std: float | None  # sample standard deviation; None with fewer than two seeds
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        values = [v for v in values if v is not None and not math.isnan(v)]
        if not values:
            return cls(None, None, 0)
        return cls(statistics.fmean(values), _sample_std(values) if len(values) > 1 else None, len(values))


@dataclass
class TaskCell:
    task: str
    metrics: dict[str, Stat]  # the task's GLUE metrics (or its main metric), over seeds
    score: Stat  # the task score (mean of its GLUE metrics), over seeds
    seeds: list
    flags: list[str] = field(default_factory=list)
    values: list[float | None] = field(default_factory=list)  # each seed's task score, in `seeds` order
    # Runs of this cell that share their seed with a run of another config (0: none; the rows-by
    # keys do not separate them), and runs that came from a multi-task training.
    same_seed_runs: int = 0
    multitask_runs: int = 0
    result_ids: list[int] = field(default_factory=list)  # the results row of each run shown (stored rows only)
    job_ids: list[int | None] = field(default_factory=list)  # the job of each run shown, in `seeds` order
    # Config keys besides the seed whose values differ among the cell's runs: its spread is over
    # runs, not seeds, and no test is offered for it.
    varying: list[str] = field(default_factory=list)
    # Runs at or below the task's majority-class baseline: {"baseline", "metric", "kind", "runs"}.
    degenerate: dict | None = None

    @property
    def spread(self) -> str:
        return "runs" if self.varying else "seeds"

    @property
    def marks(self) -> list[str]:
        """What the text renderings add after n: several configs under one seed, multi-task runs."""
        return ([f"{self.same_seed_runs} runs share a seed"] if self.same_seed_runs else []) + (
            ["multi-task"] if self.multitask_runs else []
        )


@dataclass
class Footprint:
    """What a configuration trains and stores per task: the mean over its runs of each summary
    field (equal across seeds of one config; tasks differ by their head), None where no run
    reports it (runs from before `delta_params`/`delta_bytes` were recorded)."""

    trainable_params: float | None = None
    total_params: float | None = None
    delta_params: float | None = None
    delta_bytes: float | None = None

    @classmethod
    def of(cls, runs: Iterable[TaskRun]) -> Footprint:
        runs = list(runs)
        return cls(**{f.name: Stat.of([r.footprint.get(f.name) for r in runs]).mean for f in fields(cls)})

    @property
    def trainable_fraction(self) -> float | None:
        if self.trainable_params is None or not self.total_params:
            return None
        return self.trainable_params / self.total_params

    def texts(self) -> dict[str, str]:
        """The three columns as shown: trainable parameters, % trainable, delta size."""
        return {
            "trainable": MISSING if self.trainable_params is None else count_text(self.trainable_params),
            "trainable_pct": percent_text(self.trainable_fraction),
            "delta": MISSING if self.delta_bytes is None else size_text(round(self.delta_bytes)),
        }

    def as_dict(self) -> dict:
        fraction = self.trainable_fraction
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "trainable_pct": None if fraction is None else 100 * fraction,
            "text": self.texts(),
        }


def count_text(n: float) -> str:
    """22_713_986 -> "22.7M", 74_498 -> "74.5k", 770 -> "770"."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.1f}{unit}"
    return f"{n:.0f}"


def percent_text(fraction: float | None) -> str:
    """Two significant digits below 1 %, where the parameter-efficient modes live (0.33%, 0.037%)."""
    if fraction is None:
        return MISSING
    pct = 100 * fraction
    return f"{pct:.1f}%" if pct >= 1 or pct == 0 else f"{pct:.2g}%"


def parse_adaptation_filter(text: str | None) -> list[str] | None:
    """`lora,bitfit` -> ["lora", "bitfit"]; None (no filter) -> None. A name no run has is fine (it
    selects nothing); an empty list or entry, or a name that cannot be a mode, is a ConfigError
    naming `adaptation`."""
    if text is None:
        return None
    names = [n.strip() for n in str(text).split(",")]
    if not any(names):
        raise ConfigError("adaptation: name at least one adaptation mode, e.g. adaptation=lora,bitfit")
    bad = next((n for n in names if not MODE_NAME.match(n)), None)
    if bad is not None:
        raise ConfigError(f"adaptation={text!r}: {bad!r} is not a mode name (letters, digits, _ . -; comma separated)")
    return list(dict.fromkeys(names))


@dataclass
class LeaderboardRow:
    config: dict[str, str]
    cells: dict[str, TaskCell]
    average: float | None  # the board's benchmark average (GLUE unless the board says otherwise)
    average_tasks: int  # how many of the benchmark's tasks it is over
    footprint: Footprint = field(default_factory=Footprint)
    # Rows that hold one configuration each (the default) and share their rows-by values: the
    # config keys that tell this row from those siblings, with its values.
    distinct: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)  # its runs' config (one configuration per row)
    identity: tuple | None = None  # its configuration's identity (None when rows pool)

    @property
    def label(self) -> str:
        return r_label(self)

    @property
    def flags(self) -> list[str]:
        return [f for cell in self.cells.values() for f in cell.flags]

    # The names the GLUE board's readers (dashboard view, tests) use.
    @property
    def glue_average(self) -> float | None:
        return self.average

    @property
    def glue_tasks(self) -> int:
        return self.average_tasks


@dataclass
class Leaderboard:
    group_by: tuple[str, ...]
    tasks: list[str]  # column order: the benchmark's tasks in its order, then the others alphabetically
    rows: list[LeaderboardRow]
    benchmark: Benchmark = BENCHMARKS["glue"]
    task_kinds: dict[str, str | None] = field(default_factory=dict)  # each column's task.kind, where its runs say

    def display_name(self, task: str) -> str:
        return _display(task, self.task_kinds.get(task))

    def column_metrics(self, task: str) -> list[str]:
        table = benchmark_of(task, self.task_kinds.get(task))
        if table is not None and task in table.tasks:
            return list(table.tasks[task][1])
        names = {m for r in self.rows if task in r.cells for m in r.cells[task].metrics}
        kind = KIND_COLUMNS.get(self.task_kinds.get(task) or "")
        return [m for m in kind.metrics if m in names] if kind else sorted(names)


def _kinds(kind: str | Collection[str]) -> tuple[str, ...]:
    return (kind,) if isinstance(kind, str) else tuple(kind)


def is_multitask(summary: FinetuneSummary) -> bool:
    return summary.stage == "multitask" or bool(summary.tasks) and summary.task_metrics is not None


# Summary fields that say where or when a run ran, not what: left out of a legacy run's identity.
BOOKKEEPING_FIELDS = frozenset(
    {
        "mlflow_run_id",
        "run_dir",
        "task_model_dir",
        "export_dir",
        "checkpoint",
        "sweep_id",
        "job_id",
        "seed",
        "wall_time_s",
        "train_time_s",
    }
)


def run_identity(summary: FinetuneSummary, stored: dict[str, Any]) -> tuple:
    """What a run is, besides its seed: its config hash. A summary from before runs recorded one
    is identified by what its stored row (`stored`, as written: the model's defaults and coercions
    would make it say more than it did) says of its configuration (its text and whole-number
    fields but the bookkeeping: model, objective, adaptation, backbone source, steps, sizes ...),
    so a re-run still replaces its earlier run while two runs that differ in any recorded setting
    both stay."""
    if summary.config_hash:
        return ("config", summary.config_hash)
    params = row_params(stored)
    if params:  # the flat resolved config it recorded (`hparams`): two learning rates are two runs
        return ("params", *sorted((k, repr(v)) for k, v in params.items() if k != "seed"))
    return (
        "recorded",
        *sorted((k, v) for k, v in stored.items() if k not in BOOKKEEPING_FIELDS and isinstance(v, str | int)),
    )


@dataclass(frozen=True)
class TaskRun:
    """One task's result in one results row: everything the grouping reads of the row, read once
    by `task_runs` (a multi-task row gives one per task it trained)."""

    result_id: int | None  # the results row; None for a bare summary
    row_key: int  # the row's place in the input (a multi-task row stands behind several cells)
    task: str
    kind: str | None  # task.kind where the row records it (or its kind-specific fields show it)
    metrics: dict[str, Any]
    seed: Any
    identity: tuple
    config: dict[str, str]  # every summary key a row may be grouped by, as text ("-" where missing)
    multitask: bool
    # The task's main metric: `task_main_metrics` of a multi-task run, the run's `main_metric`
    # otherwise; a single-task run's `main_score` stands in where the metric is missing.
    main_metric: str | None
    main_score: float | None
    constant_prediction: bool
    majority_rate: float | None
    footprint: dict[str, float | None]
    params: dict[str, Any] = field(default_factory=dict)  # the flat resolved config (summary `params`)
    job_id: int | None = None
    baseline: float | None = None  # the main metric's majority-class score, where recorded

    @property
    def row_identity(self) -> tuple | None:
        """What puts runs in one leaderboard row by default: their config but the task (a row spans
        the tasks a configuration ran) and the seed; None for rows stored without their config."""
        if not self.params:
            return None
        per_task = task_dependent_keys(self.params)
        return tuple(sorted((k, repr(v)) for k, v in self.params.items() if k not in per_task and k != "seed"))


def task_dependent_keys(params: dict[str, Any]) -> set[str]:
    """The keys that follow from the task a run trained on, so they tell no row's configuration
    apart: the task's own (`task.*`), the recipe's record (`recipe.*`), and each key a recipe
    handles that the user did not set (`recipe.origin.<key>`: `recipe:<name>` or `default`; a value
    the user or a sweep set stays)."""
    keys = {k for k in params if k.startswith(("task.", "recipe."))}
    keys |= {
        k.removeprefix("recipe.origin.")
        for k, v in params.items()
        if k.startswith("recipe.origin.") and (str(v).startswith("recipe:") or v == "default")
    }
    return keys


def _as_number(value) -> float | None:
    # A summary is JSON from a stage: a field may be missing, null or (in a broken one) text.
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _as_row(row: ResultRow | dict) -> ResultRow:
    if isinstance(row, ResultRow):
        return row
    return ResultRow(None, None, row.get("sweep_id"), row.get("mlflow_run_id"), row, {})


def _config_text(row: ResultRow, summary: FinetuneSummary, key: str) -> str:
    if key == "sweep_id" and row.sweep_id is not None:
        return str(row.sweep_id)  # the row's sweep: what the sweep filter selects on
    value = getattr(summary, key, None)  # a summary key: a declared field or an extra one
    if value is None and summary.hparams:
        value = summary.hparams.get(key)  # a config key: `stage.lr`, `adaptation.rank`
    return "-" if value is None else str(value)


def _baseline(summary: FinetuneSummary, stats: dict) -> float | None:
    """The main metric's majority-class score: the summary's `baseline`, or for accuracy the
    majority rate older rows recorded in `prediction_stats`."""
    if summary.baseline is not None:
        return summary.baseline.value
    metric = (summary.main_metric or "").rsplit("/", 1)[-1]
    return _as_number(stats.get("majority_rate")) if metric == "accuracy" else None


def board_summary(row: ResultRow, kinds: tuple[str, ...] = LEADERBOARD_KINDS) -> FinetuneSummary | None:
    """The row's summary as the board reads it (`ResultRow.model`), None when it is not of `kinds`;
    a bare summary with no `stage` is read as the first of `kinds`."""
    summary = row.model
    if summary is not None and summary.stage is None:
        summary = read_stored_summary({**row.summary, "stage": kinds[0]})
    return summary if isinstance(summary, FinetuneSummary) and summary.stage in kinds else None


def task_runs(
    row: ResultRow | dict,
    kinds: tuple[str, ...] = LEADERBOARD_KINDS,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
    *,
    row_key: int = 0,
) -> list[TaskRun]:
    """The task runs of one results row (none when it is not of `kinds` or records no metrics).
    A multi-task row's summary carries `task_metrics: {task: {metric: value}}`: one run per task.
    The one place the leaderboard reads a summary's fields; rows of older versions lack some."""
    row = _as_row(row)
    s = board_summary(row, kinds)
    if s is None:
        return []
    per_task = s.task_metrics
    if per_task:
        pairs = [(str(task), dict(metrics or {})) for task, metrics in per_task.items()]
    elif s.task and s.metrics is not None:
        pairs = [(s.task, dict(s.metrics))]
    else:
        return []
    mains = s.task_main_metrics or {}
    stats = s.prediction_stats or {}  # free-form in the contract: what a classifier's predictions looked like
    per_task_summary = per_task is not None
    common = {
        "result_id": row.id,
        "row_key": row_key,
        "seed": s.seed,
        "identity": run_identity(s, row.summary),
        "config": {k: _config_text(row, s, k) for k in dict.fromkeys((*group_by, "adaptation"))},
        "multitask": is_multitask(s),
        "constant_prediction": bool(stats.get("constant_prediction")),
        "majority_rate": _as_number(stats.get("majority_rate")),
        # A multi-task run's main_score is its first task's: no score for another task's cell.
        "main_score": None if per_task_summary else s.main_score,
        "footprint": {f.name: getattr(s, f.name) for f in fields(Footprint)},
        "params": row_params(row),
        "job_id": row.job_id,
        # a multi-task run's baseline would be its first task's
        "baseline": None if per_task_summary else _baseline(s, stats),
    }
    out = []
    for task, metrics in pairs:
        main = mains.get(task) or s.main_metric or (next(iter(metrics)) if len(metrics) == 1 else None)
        # a multi-task summary records no task kinds (its tasks are classification and regression);
        # an older row's kind shows in fields the contract does not declare: read from the row as stored
        kind = None if per_task_summary else summary_task_kind(row.summary)
        out.append(TaskRun(task=task, kind=kind, metrics=metrics, main_metric=main, **common))
    return out


def _run_score(run: TaskRun) -> tuple[float | None, dict[str, float]]:
    task, metrics = run.task, run.metrics
    table = benchmark_of(task, run.kind)
    if table is not None and task in table.tasks:  # GLUE or SuperGLUE: the benchmark's metrics, their mean the score
        shown = {m: float(metrics[m]) for m in table.tasks[task][1] if metrics.get(m) is not None}
        return table.task_score(task, metrics), shown
    kind = KIND_COLUMNS.get(run.kind or "")
    if kind is not None:  # a task of a kind-held board: the kind's metrics, the run's main metric the score
        scale = kind.stored_scale
        shown = {m: float(metrics[m]) / scale for m in kind.metrics if _as_number(metrics.get(m)) is not None}
        main = metrics.get(run.main_metric) if run.main_metric else None
        score = float(main) / scale if _as_number(main) is not None else None
        return score, shown
    if run.main_metric and metrics.get(run.main_metric) is not None:
        return float(metrics[run.main_metric]), {run.main_metric: float(metrics[run.main_metric])}
    score = run.main_score
    return score, ({"main_score": score} if score is not None else {})


def _degenerate(run: TaskRun) -> list[str]:
    """Why this run looks degenerate (empty: it does not)."""
    reasons = []
    metrics = run.metrics
    if (
        run.task == "cola"
        and metrics.get("matthews_correlation") is not None
        and float(metrics["matthews_correlation"]) == 0.0
    ):
        reasons.append("CoLA MCC = 0 (constant predictor?)")
    if run.constant_prediction:
        rate = run.majority_rate
        acc = metrics.get("accuracy")
        if rate is not None and acc is not None and abs(float(acc) - rate) < 1e-9:
            reasons.append(f"constant predictions (accuracy = majority rate {100 * rate:.1f})")
        else:
            reasons.append("constant predictions")
    if (
        run.baseline is not None
        and run.main_score is not None
        and run.main_score <= run.baseline + 1e-9
        and not run.constant_prediction
    ):
        reasons.append(f"at or below the majority-class baseline ({100 * run.baseline:.1f})")
    nan = [m for m, v in metrics.items() if isinstance(v, float) and math.isnan(v)]
    if nan:
        reasons.append(f"NaN {', '.join(sorted(nan))}")
    return reasons


def build_leaderboard(
    rows: Iterable[ResultRow | dict],
    *,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
    kind: str | Collection[str] = LEADERBOARD_KINDS,
    tasks: Sequence[str] | None = None,
    adaptations: Collection[str] | None = None,
    benchmark: str = "glue",
    own_tasks: bool = False,
    pool: bool = False,
) -> Leaderboard:
    """Group runs by the `group_by` summary keys, one cell per task, mean ± std over the runs
    (seeds); only the runs of `adaptations` (summary key `adaptation`) when given, only the
    benchmark's own tasks with `own_tasks` (named in its table or of its kinds); each row's average
    is `benchmark`'s (glue, superglue; none for tasks, generation: ptmlab.contracts.benchmarks).

    A later row of the same run identity (config hash) and seed replaces an earlier one (a
    re-run), so pass rows oldest first (as `load_rows` and `read_rows` return them); runs of
    different configs that share a seed and the `group_by` keys are all kept, and their cell says so.

    By default a row holds the runs of one configuration (they differ only in their seed): rows that
    share the `group_by` values are told apart by `distinct`. With `pool` the rows are the `group_by`
    values alone, and a cell whose runs differ in other config keys names them (`varying`)."""
    return (
        LeaderboardFold(
            group_by=group_by,
            kind=kind,
            tasks=tasks,
            adaptations=adaptations,
            benchmark=benchmark,
            own_tasks=own_tasks,
            pool=pool,
        )
        .add(rows)
        .board()
    )


class LeaderboardFold:
    """`build_leaderboard` kept up to date as rows arrive (the dashboard's view, ptmlab.results
    `folded`): `add(rows)` files each run under its row and cell, and `board()` rebuilds only the
    rows a new run changed; the others are reused as built."""

    def __init__(
        self,
        *,
        group_by: Sequence[str] = DEFAULT_GROUP_BY,
        kind: str | Collection[str] = LEADERBOARD_KINDS,
        tasks: Sequence[str] | None = None,
        adaptations: Collection[str] | None = None,
        benchmark: str = "glue",
        own_tasks: bool = False,
        pool: bool = False,
    ):
        if benchmark not in BENCHMARKS:
            raise ConfigError(f"benchmark={benchmark} is unknown; valid: {', '.join(BENCHMARKS)}")
        self.bench = BENCHMARKS[benchmark]
        self.group_by, self.kinds, self.tasks, self.adaptations = tuple(group_by), _kinds(kind), tasks, adaptations
        self.own_tasks, self.pool = own_tasks, pool
        # config -> task -> (seed, identity) -> run, in run order (a re-run moves to the end)
        self._runs: dict[tuple, dict[str, dict[tuple, TaskRun]]] = {}
        self._built: dict[tuple, LeaderboardRow] = {}  # rows no run changed since they were built
        self._rows_seen = 0  # row_key of the next row: a multi-task row stands behind several cells
        self.task_kinds: dict[str, str | None] = {}  # each task's kind (metric order, column order)
        self.modes: set[str] = set()  # every adaptation mode the rows have (the page's mode filter)
        self.result_count = 0  # rows of the selected adaptation modes
        # A reader's rendering of each built row, kept beside it while the row stands
        # (ptmlab.views.leaderboard: its JSON): config -> (row, what the reader made of it ...).
        self.rendered: dict[tuple, tuple] = {}

    def add(self, rows: Iterable[ResultRow | dict]) -> LeaderboardFold:
        for row in rows:
            row_key, self._rows_seen = self._rows_seen, self._rows_seen + 1
            row = _as_row(row)
            summary = board_summary(row, self.kinds)
            if summary is not None:
                if summary.adaptation:
                    self.modes.add(summary.adaptation)
                if not self.adaptations or str(summary.adaptation) in self.adaptations:
                    self.result_count += 1
            for run in task_runs(row, self.kinds, self.group_by, row_key=row_key):
                if (self.tasks and run.task not in self.tasks) or (
                    self.adaptations and run.config["adaptation"] not in self.adaptations
                ):
                    continue
                if self.own_tasks and not self.bench.holds(run.task, run.kind):
                    continue
                if run.kind is not None and self.task_kinds.get(run.task) != run.kind:
                    self.task_kinds[run.task] = run.kind
                    # a task's kind orders its metrics: every row holding the task is built again
                    for config, by_task in self._runs.items():
                        if run.task in by_task:
                            self._built.pop(config, None)
                config = tuple(run.config[k] for k in self.group_by)
                if not self.pool:  # one configuration per row: its runs differ only in their seed
                    config = (*config, run.row_identity)
                cell = self._runs.setdefault(config, {}).setdefault(run.task, {})
                key = (run.seed if run.seed is not None else f"run:{run.identity}", run.identity)
                cell.pop(key, None)  # a re-run takes the place of the earlier run, in run order
                cell[key] = run
                self._built.pop(config, None)
        return self

    def board(self) -> Leaderboard:
        for config, by_task in self._runs.items():
            if config not in self._built:
                self._built[config] = self._row(config, {task: list(runs.values()) for task, runs in by_task.items()})
        board_rows = sorted(
            self._built.values(),
            key=lambda r: (
                -(r.average_tasks),
                -(r.average if r.average is not None else -1e9),
                tuple(r.config.values()),
            ),
        )
        _name_siblings(board_rows)
        bench = self.bench
        present = {t for r in board_rows for t in r.cells}
        # a kind-held board's columns by kind in the benchmark's order (QA, tagging, choice), then by name
        rank = {k: i for i, k in enumerate(bench.kinds)}
        rest = sorted(present - set(bench.tasks), key=lambda t: (rank.get(self.task_kinds.get(t) or "", len(rank)), t))
        columns = [t for t in bench.tasks if t in present] + rest
        return Leaderboard(
            group_by=self.group_by,
            tasks=columns,
            rows=board_rows,
            benchmark=bench,
            task_kinds={t: self.task_kinds.get(t) for t in columns},
        )

    def _row(self, config: tuple, by_task: dict[str, list[TaskRun]]) -> LeaderboardRow:
        cells = {}
        for task, runs in by_task.items():
            runs.sort(key=lambda r: (r.seed is None, str(r.seed)))
            scored = [(r, *_run_score(r)) for r in runs]
            order = _metric_order(task, self.task_kinds.get(task))
            names = sorted({m for _, _, shown in scored for m in shown}, key=lambda m: (order + (m,)).index(m))
            flags = [f"{_display(task, r.kind)} seed {r.seed}: {why}" for r in runs for why in _degenerate(r)]
            clashes = _same_seed_clashes(_display(task, self.task_kinds.get(task)), runs)
            degenerate = [
                r
                for r in runs
                if r.baseline is not None and r.main_score is not None and r.main_score <= r.baseline + 1e-9
            ]
            cells[task] = TaskCell(
                task=task,
                metrics={m: Stat.of([shown.get(m) for _, _, shown in scored]) for m in names},
                score=Stat.of([score for _, score, _ in scored]),
                seeds=[r.seed for r in runs],
                flags=flags + [why for why, _ in clashes],
                values=[score for _, score, _ in scored],
                same_seed_runs=sum(n for _, n in clashes),
                multitask_runs=sum(1 for r in runs if r.multitask),
                result_ids=[r.result_id for r in runs if r.result_id is not None],
                job_ids=[r.job_id for r in runs],
                varying=_varying(runs, self.group_by),
                degenerate=None
                if not degenerate
                else {
                    "baseline": max(r.baseline for r in degenerate),
                    "metric": degenerate[0].main_metric,
                    "kind": "majority_class",
                    "runs": len(degenerate),
                },
            )
        task_means = {t: c.score.mean for t, c in cells.items()}
        return LeaderboardRow(
            config=dict(zip(self.group_by, config[: len(self.group_by)], strict=True)),
            cells=cells,
            average=self.bench.average(task_means),
            average_tasks=sum(1 for t, v in task_means.items() if t in self.bench.tasks and v is not None),
            footprint=_footprint(by_task),
            params=next((r.params for runs in by_task.values() for r in runs), {}),
            identity=None if self.pool else config[-1],
        )


def _display(task: str, kind: str | None = None) -> str:
    table = benchmark_of(task, kind)
    return table.tasks[task][0] if table is not None and task in table.tasks else task


def _metric_order(task: str, kind: str | None) -> tuple[str, ...]:
    table = benchmark_of(task, kind)
    if table is not None and task in table.tasks:
        return table.tasks[task][1]
    return KIND_COLUMNS[kind].metrics if kind in KIND_COLUMNS else ()


def _varying(runs: list[TaskRun], group_by: Sequence[str]) -> list[str]:
    """The config keys besides the seed and the rows-by keys whose values differ among `runs`;
    ["config"] where their identities differ but no recorded key says how (older rows)."""
    keys = sorted({k for r in runs for k in r.params} - set(group_by) - {"seed"})
    # where a value came from (recipe or override: ptmlab.recipes) is not a setting; the value's own key is
    differ = [k for k in keys if not k.startswith("recipe.origin.") and _differs(runs, k)]
    if differ or all(r.params for r in runs) or len({r.identity for r in runs}) <= 1:
        return differ
    return ["config"]


def _differs(runs: list[TaskRun], key: str) -> bool:
    """Whether `key`'s value (None where absent) is not the same in every run; stops at the first
    difference (a pooled cell of 10,000 runs is rebuilt whenever one of them is added)."""
    first = runs[0].params.get(key)
    kind = type(first)
    return any(type(v) is not kind or v != first for v in (r.params.get(key) for r in runs))


def _name_siblings(rows: list[LeaderboardRow]) -> None:
    """Rows that share their rows-by values (one configuration each) get `distinct`: the config keys
    whose values differ between them, with this row's values; a config hash where none is recorded."""
    by_label: dict[tuple, list[LeaderboardRow]] = {}
    for row in rows:
        by_label.setdefault(tuple(row.config.values()), []).append(row)
    for siblings in by_label.values():
        if len(siblings) == 1:
            siblings[0].distinct = {}
            continue
        params = [_row_params(row) for row in siblings]
        # a row spans the tasks its configuration ran: the task keys tell no row apart
        per_task = set().union(*(task_dependent_keys(p) for p in params))
        keys = sorted({k for p in params for k in p if k not in per_task} - set(siblings[0].config) - {"seed"})
        differ = [k for k in keys if len({repr(p.get(k)) for p in params}) > 1]
        for row, p in zip(siblings, params, strict=True):
            row.distinct = {k: str(p.get(k, "-")) for k in differ} if differ else {"config": _row_hash(row)}


def _row_params(row: LeaderboardRow) -> dict[str, Any]:
    return row.params


def _row_hash(row: LeaderboardRow) -> str:
    import hashlib

    return hashlib.sha256(repr(row.identity).encode()).hexdigest()[:8] if row.identity else "not recorded"


def _same_seed_clashes(name: str, runs: list[TaskRun]) -> list[tuple[str, int]]:
    """(why, how many runs) for every seed that several runs of different identities share in one
    cell: the rows-by keys do not separate them, so they are all shown and counted."""
    by_seed: dict[str, set[tuple]] = {}
    for r in runs:
        if r.seed is not None:
            by_seed.setdefault(str(r.seed), set()).add(r.identity)
    out = []
    for seed, identities in by_seed.items():
        if len(identities) > 1:
            why = "runs of different configs (the rows-by keys do not tell them apart)"
            out.append((f"{name} seed {seed}: {len(identities)} {why}", len(identities)))
    return out


def _footprint(by_task: dict[str, list[TaskRun]]) -> Footprint:
    # A multi-task run stands behind several cells: count its row once.
    return Footprint.of({r.row_key: r for runs in by_task.values() for r in runs}.values())


def per_seed_glue_average(row: LeaderboardRow, benchmark: Benchmark = BENCHMARKS["glue"]) -> tuple[list, list[float]]:
    """(seeds, the row's benchmark (GLUE) average at each) over the seeds every one of its tasks in
    the benchmark has."""
    cells = {t: c for t, c in row.cells.items() if t in benchmark.tasks}
    if not cells:
        return [], []
    common = set.intersection(*(set(c.seeds) for c in cells.values()))
    seeds: list = []
    out: list[float] = []
    for seed in sorted(common, key=str):
        scores = {t: c.values[c.seeds.index(seed)] for t, c in cells.items()}
        if all(v is not None for v in scores.values()):
            seeds.append(seed)
            out.append(benchmark.average(scores))
    return seeds, out


def compare_rows(board: Leaderboard, label_a: str, label_b: str) -> list[dict]:
    """Row A against row B (labels as `r_label` writes them), per task both have and for the GLUE
    average, on the 0-100 scale: the difference of means, and an interval and p-value only where
    the seeds support one (ptmlab.stats: ≥ 3 seeds a side, no pooled configs; paired over common
    seeds, Welch otherwise)."""
    rows = {r_label(r): r for r in board.rows}
    for label in (label_a, label_b):
        if label not in rows:
            raise NotFoundError(f"no leaderboard row {label!r} (rows: {', '.join(sorted(rows)) or 'none'})")
    a, b = rows[label_a], rows[label_b]
    pairs = [(t, board.display_name(t), a.cells[t], b.cells[t]) for t in board.tasks if t in a.cells and t in b.cells]
    out = []
    for task, name, ca, cb in pairs:
        out.append(_compared(task, name, (ca.seeds, ca.values, ca.varying), (cb.seeds, cb.values, cb.varying)))
    bench = board.benchmark
    if bench.averaged:
        sides = []
        for row in (a, b):
            seeds, values = per_seed_glue_average(row, bench)
            varying = sorted({k for t, c in row.cells.items() if t in bench.tasks for k in c.varying})
            sides.append((seeds, values, varying))
        out.append(_compared(bench.name, f"{bench.display_name} avg", *sides))
    return [c for c in out if c is not None]


def _compared(task: str, name: str, a: tuple, b: tuple) -> dict | None:
    from ptmlab.stats import compare_seeds

    (sa, xa, va), (sb, xb, vb) = a, b
    ka = [(s, 100 * v) for s, v in zip(sa, xa, strict=True) if v is not None]
    kb = [(s, 100 * v) for s, v in zip(sb, xb, strict=True) if v is not None]
    if not ka or not kb:
        return None
    # seeds pair only when each side holds one run per seed
    seeds_a = [s for s, _ in ka] if len({s for s, _ in ka}) == len(ka) else None
    seeds_b = [s for s, _ in kb] if len({s for s, _ in kb}) == len(kb) else None
    result = compare_seeds(
        [v for _, v in ka], [v for _, v in kb], a_seeds=seeds_a, b_seeds=seeds_b, a_pooled=va, b_pooled=vb
    )
    return {"task": task, "name": name, **result.as_dict()}


def r_label(row: LeaderboardRow) -> str:
    """The rows-by values joined by " / ", then what tells the row from its siblings: " · stage.lr=0.001"."""
    return " / ".join(row.config.values()) + "".join(f" · {k}={v}" for k, v in row.distinct.items())

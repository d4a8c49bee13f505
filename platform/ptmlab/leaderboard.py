"""The GLUE leaderboard: finetune results grouped by configuration, mean ± std over seeds.

Torch-free (the API and the dashboard use it). Input is any iterable of summary dicts (the
`summary.json` of finetune runs, as stored in the platform's `results` table); `load_summaries`
reads them from the database.

Per run, a GLUE task's score is the mean of its GLUE metrics (MRPC/QQP: F1 and accuracy; STS-B:
Pearson and Spearman; MNLI: matched and mismatched accuracy), then per configuration the mean
over seeds; the GLUE average is the unweighted mean of those task scores over the GLUE tasks the
configuration has (the count is shown: averages over different task sets do not compare). Numbers
are shown on GLUE's 0-100 scale. Non-GLUE tasks (SentEval, tabular) get a column, scored by the
run's main metric, and stay out of the GLUE average.

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

import csv
import io
import json
import math
import re
import statistics
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, fields

# GLUE's task table and scoring live in ptmlab.contracts.glue, shared with the science half.
from ptmlab.contracts.glue import GLUE_TASKS, glue_average, glue_task_score  # noqa: F401 - re-exported
from ptmlab.errors import ConfigError, NotFoundError
from ptmlab.sizes import size_text

METRIC_ABBREV = {"matthews_correlation": "mcc", "accuracy": "acc", "accuracy_mm": "acc_mm", "f1": "f1",
                 "pearson": "pearson", "spearmanr": "spearman", "macro_f1": "macro_f1"}
DEFAULT_GROUP_BY = ("model", "objective", "adaptation")
# The result kinds the leaderboard reads: single-task fine-tunes and multi-task runs.
LEADERBOARD_KINDS = ("finetune", "multitask")
FORMATS = ("table", "csv", "latex")
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
    result_ids: list = field(default_factory=list)  # the `_result_id` of each run shown, where given

    @property
    def marks(self) -> list[str]:
        """What the text renderings add after n: several configs under one seed, multi-task runs."""
        return ([f"{self.same_seed_runs} runs share a seed"] if self.same_seed_runs else []) + \
            (["multi-task"] if self.multitask_runs else [])


def _as_number(value) -> float | None:
    # A summary is JSON from a stage: a field may be missing, null or (in a broken one) text.
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


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
    def of(cls, summaries: Iterable[dict]) -> Footprint:
        summaries = list(summaries)
        return cls(**{f.name: Stat.of([_as_number(s.get(f.name)) for s in summaries]).mean for f in fields(cls)})

    @property
    def trainable_fraction(self) -> float | None:
        if self.trainable_params is None or not self.total_params:
            return None
        return self.trainable_params / self.total_params

    def texts(self) -> dict[str, str]:
        """The three columns as shown: trainable parameters, % trainable, delta size."""
        return {"trainable": MISSING if self.trainable_params is None else count_text(self.trainable_params),
                "trainable_pct": percent_text(self.trainable_fraction),
                "delta": MISSING if self.delta_bytes is None else size_text(round(self.delta_bytes))}

    def as_dict(self) -> dict:
        fraction = self.trainable_fraction
        return {**{f.name: getattr(self, f.name) for f in fields(self)},
                "trainable_pct": None if fraction is None else 100 * fraction, "text": self.texts()}


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


def matches_adaptation(summary: dict, adaptations: Collection[str] | None) -> bool:
    return not adaptations or str(summary.get("adaptation")) in adaptations


@dataclass
class LeaderboardRow:
    config: dict[str, str]
    cells: dict[str, TaskCell]
    glue_average: float | None
    glue_tasks: int
    footprint: Footprint = field(default_factory=Footprint)

    @property
    def flags(self) -> list[str]:
        return [f for cell in self.cells.values() for f in cell.flags]


@dataclass
class Leaderboard:
    group_by: tuple[str, ...]
    tasks: list[str]  # column order: GLUE tasks in GLUE order, then the others alphabetically
    rows: list[LeaderboardRow]

    def display_name(self, task: str) -> str:
        return GLUE_TASKS[task][0] if task in GLUE_TASKS else task

    def column_metrics(self, task: str) -> list[str]:
        if task in GLUE_TASKS:
            return list(GLUE_TASKS[task][1])
        names = {m for r in self.rows if task in r.cells for m in r.cells[task].metrics}
        return sorted(names)


def _kinds(kind: str | Collection[str]) -> tuple[str, ...]:
    return (kind,) if isinstance(kind, str) else tuple(kind)


def is_multitask(summary: dict) -> bool:
    return summary.get("stage") == "multitask" or bool(summary.get("tasks")) and isinstance(
        summary.get("task_metrics"), dict)


# Summary fields that say where or when a run ran, not what: left out of a legacy run's identity.
BOOKKEEPING_FIELDS = frozenset({"mlflow_run_id", "run_dir", "task_model_dir", "export_dir", "checkpoint", "sweep_id",
                                "_result_id", "job_id", "seed", "wall_time_s", "train_time_s"})


def run_identity(summary: dict) -> tuple:
    """What a run is, besides its seed: its config hash. A summary from before runs recorded one
    is identified by what it says of its configuration (its text and whole-number fields but the
    bookkeeping: model, objective, adaptation, backbone source, steps, sizes ...), so a re-run still
    replaces its earlier run while two runs that differ in any recorded setting both stay."""
    if summary.get("config_hash"):
        return ("config", summary["config_hash"])
    return ("recorded", *sorted((k, v) for k, v in summary.items()
                                if k not in BOOKKEEPING_FIELDS and isinstance(v, str | int)))


def _runs(summaries: Iterable[dict], kinds: tuple[str, ...]):
    """(task, metrics, summary) for every finetune task result; a multi-task run's summary
    carries `task_metrics: {task: {metric: value}}`: one result per task."""
    for s in summaries:
        if not isinstance(s, dict) or s.get("stage", kinds[0]) not in kinds:
            continue
        per_task = s.get("task_metrics")
        if isinstance(per_task, dict) and per_task:
            for task, metrics in per_task.items():
                yield str(task), dict(metrics or {}), s
        elif s.get("task") and isinstance(s.get("metrics"), dict):
            yield str(s["task"]), dict(s["metrics"]), s


def _run_score(task: str, metrics: dict, summary: dict) -> tuple[float | None, dict[str, float]]:
    if task in GLUE_TASKS:
        shown = {m: float(metrics[m]) for m in GLUE_TASKS[task][1] if metrics.get(m) is not None}
        return glue_task_score(task, metrics), shown
    per_task = summary.get("task_main_metrics")
    if isinstance(per_task, dict) and per_task.get(task):
        main = per_task[task]
    else:
        main = summary.get("main_metric") or (next(iter(metrics)) if len(metrics) == 1 else None)
    if main and metrics.get(main) is not None:
        return float(metrics[main]), {main: float(metrics[main])}
    if isinstance(summary.get("task_metrics"), dict):
        # A multi-task run's main_score is its first task's: no score for another task's cell.
        return None, {}
    score = summary.get("main_score")
    return (float(score) if score is not None else None), ({"main_score": float(score)} if score is not None else {})


def _degenerate(task: str, metrics: dict, summary: dict) -> list[str]:
    """Why this run looks degenerate (empty: it does not)."""
    reasons = []
    if task == "cola" and metrics.get("matthews_correlation") is not None \
            and float(metrics["matthews_correlation"]) == 0.0:
        reasons.append("CoLA MCC = 0 (constant predictor?)")
    stats = summary.get("prediction_stats") or {}
    if isinstance(stats, dict) and stats.get("constant_prediction"):
        rate = stats.get("majority_rate")
        acc = metrics.get("accuracy")
        if rate is not None and acc is not None and abs(float(acc) - float(rate)) < 1e-9:
            reasons.append(f"constant predictions (accuracy = majority rate {100 * float(rate):.1f})")
        else:
            reasons.append("constant predictions")
    nan = [m for m, v in metrics.items() if isinstance(v, float) and math.isnan(v)]
    if nan:
        reasons.append(f"NaN {', '.join(sorted(nan))}")
    return reasons


def build_leaderboard(summaries: Iterable[dict], *, group_by: Sequence[str] = DEFAULT_GROUP_BY,
                      kind: str | Collection[str] = LEADERBOARD_KINDS, tasks: Sequence[str] | None = None,
                      adaptations: Collection[str] | None = None) -> Leaderboard:
    """Group runs by the `group_by` summary keys, one cell per task, mean ± std over the runs
    (seeds); only the runs of `adaptations` (summary key `adaptation`) when given.

    A later summary of the same run identity (config hash) and seed replaces an earlier one (a
    re-run), so pass summaries oldest first (as `load_summaries` returns them); runs of different
    configs that share a seed and the `group_by` keys are all kept, and their cell says so."""
    group_by = tuple(group_by)
    latest: dict[tuple, dict] = {}
    for task, metrics, s in _runs(summaries, _kinds(kind)):
        if (tasks and task not in tasks) or not matches_adaptation(s, adaptations):
            continue
        config = tuple(str(s.get(k, "-")) for k in group_by)
        seed = s.get("seed")
        identity = run_identity(s)
        key = (config, task, seed if seed is not None else f"run:{identity}", identity)
        latest.pop(key, None)  # a re-run takes the place of the earlier run, in run order
        latest[key] = {"task": task, "metrics": metrics, "summary": s, "seed": seed, "identity": identity}
    grouped: dict[tuple, dict[str, list[dict]]] = {}
    for (config, task, _, _), run in latest.items():
        grouped.setdefault(config, {}).setdefault(task, []).append(run)

    rows = []
    for config, by_task in grouped.items():
        cells = {}
        for task, runs in by_task.items():
            runs.sort(key=lambda r: (r["seed"] is None, str(r["seed"])))
            scored = [(r, *_run_score(task, r["metrics"], r["summary"])) for r in runs]
            names = sorted({m for _, _, shown in scored for m in shown},
                           key=lambda m: (GLUE_TASKS.get(task, ("", ()))[1] + (m,)).index(m))
            flags = [f"{GLUE_TASKS.get(task, (task,))[0]} seed {r['seed']}: {why}"
                     for r in runs for why in _degenerate(task, r["metrics"], r["summary"])]
            clashes = _same_seed_clashes(task, runs)
            cells[task] = TaskCell(
                task=task,
                metrics={m: Stat.of([shown.get(m) for _, _, shown in scored]) for m in names},
                score=Stat.of([score for _, score, _ in scored]),
                seeds=[r["seed"] for r in runs], flags=flags + [why for why, _ in clashes],
                values=[score for _, score, _ in scored],
                same_seed_runs=sum(n for _, n in clashes),
                multitask_runs=sum(1 for r in runs if is_multitask(r["summary"])),
                result_ids=[r["summary"]["_result_id"] for r in runs if r["summary"].get("_result_id") is not None],
            )
        task_means = {t: c.score.mean for t, c in cells.items()}
        rows.append(LeaderboardRow(
            config=dict(zip(group_by, config, strict=True)), cells=cells,
            glue_average=glue_average(task_means),
            glue_tasks=sum(1 for t, v in task_means.items() if t in GLUE_TASKS and v is not None),
            footprint=_footprint(by_task),
        ))
    rows.sort(key=lambda r: (-(r.glue_tasks), -(r.glue_average if r.glue_average is not None else -1e9),
                             tuple(r.config.values())))
    present = {t for r in rows for t in r.cells}
    columns = [t for t in GLUE_TASKS if t in present] + sorted(present - set(GLUE_TASKS))
    return Leaderboard(group_by=group_by, tasks=columns, rows=rows)


def _same_seed_clashes(task: str, runs: list[dict]) -> list[tuple[str, int]]:
    """(why, how many runs) for every seed that several runs of different identities share in one
    cell: the rows-by keys do not separate them, so they are all shown and counted."""
    by_seed: dict[str, set[str]] = {}
    for r in runs:
        if r["seed"] is not None:
            by_seed.setdefault(str(r["seed"]), set()).add(r["identity"])
    out = []
    for seed, identities in by_seed.items():
        if len(identities) > 1:
            why = "runs of different configs (the rows-by keys do not tell them apart)"
            out.append((f"{GLUE_TASKS.get(task, (task,))[0]} seed {seed}: {len(identities)} {why}", len(identities)))
    return out


def _footprint(by_task: dict[str, list[dict]]) -> Footprint:
    # A multi-task run stands behind several cells: count its summary once.
    summaries = {id(r["summary"]): r["summary"] for runs in by_task.values() for r in runs}
    return Footprint.of(summaries.values())


def per_seed_glue_average(row: LeaderboardRow) -> list[float]:
    """The row's GLUE average seed by seed, over the seeds every one of its GLUE tasks has."""
    glue = {t: c for t, c in row.cells.items() if t in GLUE_TASKS}
    if not glue:
        return []
    common = set.intersection(*(set(c.seeds) for c in glue.values()))
    out = []
    for seed in sorted(common, key=str):
        scores = {t: c.values[c.seeds.index(seed)] for t, c in glue.items()}
        if all(v is not None for v in scores.values()):
            out.append(glue_average(scores))
    return out


def compare_rows(board: Leaderboard, label_a: str, label_b: str) -> list[dict]:
    """Row A against row B (labels as `r_label` writes them), per task both have and for the GLUE
    average: difference of means over seeds with its 95 % interval and p-value (ptmlab.stats),
    on the 0-100 scale."""
    from ptmlab.stats import compare_seeds

    rows = {r_label(r): r for r in board.rows}
    for label in (label_a, label_b):
        if label not in rows:
            raise NotFoundError(f"no leaderboard row {label!r} (rows: {', '.join(sorted(rows)) or 'none'})")
    a, b = rows[label_a], rows[label_b]
    pairs = [(t, board.display_name(t), a.cells[t].values, b.cells[t].values)
             for t in board.tasks if t in a.cells and t in b.cells]
    pairs.append(("glue", "GLUE avg", per_seed_glue_average(a), per_seed_glue_average(b)))
    out = []
    for task, name, xs, ys in pairs:
        xs, ys = [100 * v for v in xs if v is not None], [100 * v for v in ys if v is not None]
        if xs and ys:
            out.append({"task": task, "name": name, **compare_seeds(xs, ys).as_dict()})
    return out


# -- rendering ---------------------------------------------------------------------------------

def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def _stat_text(s: Stat) -> str:
    if s.mean is None:
        return "-"
    return _pct(s.mean) + (f"±{100 * s.std:.1f}" if s.std is not None else "")


def _cell_text(cell: TaskCell | None, metrics: list[str]) -> str:
    if cell is None:
        return ""
    # One slot per column metric, "-" where a run set lacks it (MNLI without a mismatched dev).
    text = "/".join(_stat_text(cell.metrics.get(m, Stat(None, None, 0))) for m in metrics) or "-"
    return f"{text} (n={', '.join([str(cell.score.n), *cell.marks])})" + (" !" if cell.flags else "")


FOOTPRINT_HEADERS = ("trainable", "% trainable", "delta")


def render_table(board: Leaderboard) -> str:
    """A plain-text table: mean±std over seeds (n = runs shown, then "k runs share a seed" or
    "multi-task" where it applies), `!` marks a flagged cell; then the
    footprint: trainable parameters, their share of all, the per-task delta's size."""
    header = [*board.group_by]
    for t in board.tasks:
        metrics = "/".join(METRIC_ABBREV.get(m, m) for m in board.column_metrics(t))
        header.append(f"{board.display_name(t)} {metrics}".strip())
    header += ["GLUE avg", *FOOTPRINT_HEADERS]
    lines = [header]
    for r in board.rows:
        avg = "-" if r.glue_average is None else f"{_pct(r.glue_average)} ({r.glue_tasks} tasks)"
        lines.append([*r.config.values(), *(_cell_text(r.cells.get(t), board.column_metrics(t)) for t in board.tasks), avg,
                      *r.footprint.texts().values()])
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    flags = [f"! {r_label(r)}: {f}" for r in board.rows for f in r.flags]
    return "\n".join(out + ([""] + flags if flags else [])) + "\n"


def r_label(row: LeaderboardRow) -> str:
    return " / ".join(row.config.values())


FOOTPRINT_CSV = ("trainable_params", "total_params", "trainable_pct", "delta_params", "delta_bytes")


def _raw(v: float | None) -> str:
    if v is None:
        return ""
    return str(int(v)) if float(v).is_integer() else f"{v:.4f}"


def render_csv(board: Leaderboard) -> str:
    """One row per configuration; per task and metric the mean and std (0-100 scale) and n; the
    footprint as raw numbers (empty where the runs did not record it)."""
    header = [*board.group_by]
    for t in board.tasks:
        for m in board.column_metrics(t):
            header += [f"{t}/{m}/mean", f"{t}/{m}/std"]
        header += [f"{t}/score/mean", f"{t}/score/std", f"{t}/n", f"{t}/flags", f"{t}/same_seed_runs",
                   f"{t}/multitask_runs"]
    header += ["glue/average", "glue/tasks", *FOOTPRINT_CSV]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)

    def num(v):
        return "" if v is None else f"{100 * v:.4f}"

    for r in board.rows:
        row = [*r.config.values()]
        for t in board.tasks:
            cell = r.cells.get(t)
            for m in board.column_metrics(t):
                s = cell.metrics.get(m) if cell else None
                row += [num(s.mean), num(s.std)] if s else ["", ""]
            row += ([num(cell.score.mean), num(cell.score.std), cell.score.n, "; ".join(cell.flags),
                     cell.same_seed_runs, cell.multitask_runs] if cell else ["", "", 0, "", 0, 0])
        row += [num(r.glue_average), r.glue_tasks]
        footprint = r.footprint.as_dict()
        w.writerow(row + [_raw(footprint[k]) for k in FOOTPRINT_CSV])
    return buf.getvalue()


_LATEX_ESCAPES = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
                  "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"}


def _tex(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def _tex_stat(s: Stat | None, best: bool = False) -> str:
    if s is None or s.mean is None:
        return "--"
    mean = f"\\mathbf{{{_pct(s.mean)}}}" if best else _pct(s.mean)
    return f"${mean}" + (f" \\pm {100 * s.std:.1f}$" if s.std is not None else "$")


def _seed_note(board: Leaderboard) -> str:
    """The footnote: how many seeds stand behind the cells (one count when they all agree)."""
    counts = sorted({c.score.n for r in board.rows for c in r.cells.values()})
    if not counts:
        return ""
    seeds = (f"{counts[0]} seed{'s' if counts[0] != 1 else ''} per cell" if len(counts) == 1
             else f"{counts[0]}--{counts[-1]} seeds per cell: " + "; ".join(
                 f"{_tex(r_label(r))} {'/'.join(str(r.cells[t].score.n) if t in r.cells else '--' for t in board.tasks)}"
                 for r in board.rows))
    return (f"\\par\\footnotesize Dev scores $\\times 100$, mean $\\pm$ sample std over seeds ({seeds}); "
            "best per column in bold" + ("; $^\\dagger$ flagged: a degenerate run, or runs of different "
                                         "configurations under one seed (see the dashboard)" if any(
                r.flags for r in board.rows) else "") + ("; $^\\ast$ multi-task runs" if any(
                c.multitask_runs for r in board.rows for c in r.cells.values()) else "") + ".")


def _tex_footprint(fp: Footprint) -> str:
    text = fp.texts()
    if fp.trainable_fraction is None and fp.delta_bytes is None:
        return "--"
    return " / ".join(_tex(text[k]) if text[k] != MISSING else "--" for k in ("trainable_pct", "delta"))


def render_latex(board: Leaderboard) -> str:
    """A booktabs table for a paper: mean ± std over seeds, the best score of each column in bold,
    the seed counts in a footnote, \\dagger on a flagged cell; a compact footprint column
    (% trainable / delta size) when any row's runs recorded one."""
    footprint = any(r.footprint != Footprint() for r in board.rows)
    cols = "l" * len(board.group_by) + "r" * (len(board.tasks) + 1 + footprint)
    head = [_tex(k.capitalize()) for k in board.group_by]
    for t in board.tasks:
        metrics = "/".join(METRIC_ABBREV.get(m, m) for m in board.column_metrics(t))
        head.append(f"{_tex(board.display_name(t))} \\tiny{{{_tex(metrics)}}}" if metrics else _tex(board.display_name(t)))
    head.append("GLUE")
    if footprint:
        head.append("Trainable \\tiny{\\% / delta}")
    lines = [f"\\begin{{tabular}}{{{cols}}}", "\\toprule", " & ".join(head) + " \\\\", "\\midrule"]
    # Best per column, at the precision shown (ties are all bold).
    best = {t: max((round(100 * r.cells[t].score.mean, 1) for r in board.rows
                    if t in r.cells and r.cells[t].score.mean is not None), default=None) for t in board.tasks}
    # GLUE averages over different task sets do not compare: the best among the rows with the most tasks.
    most = max((r.glue_tasks for r in board.rows), default=0)
    best_glue = max((round(100 * r.glue_average, 1) for r in board.rows
                     if r.glue_average is not None and r.glue_tasks == most), default=None)
    for r in board.rows:
        cells = [_tex(v) for v in r.config.values()]
        for t in board.tasks:
            cell = r.cells.get(t)
            if cell is None:
                cells.append("")
                continue
            top = cell.score.mean is not None and round(100 * cell.score.mean, 1) == best[t]
            text = "/".join(_tex_stat(cell.metrics.get(m), top) for m in board.column_metrics(t)) or "--"
            cells.append(text + ("$^\\dagger$" if cell.flags else "") + ("$^\\ast$" if cell.multitask_runs else ""))
        glue = "--" if r.glue_average is None else _pct(r.glue_average)
        top_glue = r.glue_average is not None and r.glue_tasks == most and round(100 * r.glue_average, 1) == best_glue
        cells.append(f"\\textbf{{{glue}}}" if top_glue else glue)
        if footprint:
            cells.append(_tex_footprint(r.footprint))
        lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    note = _seed_note(board)
    return "\n".join(lines + ([note] if note else [])) + "\n"


def render(board: Leaderboard, fmt: str = "table") -> str:
    if fmt == "table":
        return render_table(board)
    if fmt == "csv":
        return render_csv(board)
    if fmt == "latex":
        return render_latex(board)
    raise ConfigError(f"format={fmt} is unknown; valid: {', '.join(FORMATS)}")


# -- reading the results table -----------------------------------------------------------------

def load_summaries(database_url: str | None = None, *, kind: str | Collection[str] = "finetune",
                   sweep_id: str | None = None) -> list[dict]:
    """Summaries of the `results` rows of `kind` (one or several kinds; oldest first), optionally
    of one sweep. Each carries `_result_id` (its row).

    Reads the table by reflection through SQLAlchemy, so it depends only on the contract
    (results: kind, sweep_id, summary JSON, created_at), not on the ORM module's classes."""
    import sqlalchemy as sa

    if database_url is None:
        from ptmlab.settings import get_settings

        database_url = get_settings().resolved_database_url
    engine = sa.create_engine(database_url)
    try:
        try:
            table = sa.Table("results", sa.MetaData(), autoload_with=engine)
        except sa.exc.NoSuchTableError:
            raise NotFoundError(f"no results table in {engine.url.render_as_string(hide_password=True)} "
                                f"(has the platform database been created?)") from None
        query = sa.select(table.c.summary, table.c.sweep_id, table.c.id).where(table.c.kind.in_(_kinds(kind)))
        if sweep_id is not None:
            query = query.where(table.c.sweep_id == sweep_id)
        if "created_at" in table.c:
            query = query.order_by(table.c.created_at, table.c.id)
        with engine.connect() as conn:
            rows = conn.execute(query).all()
    finally:
        engine.dispose()
    out = []
    for summary, sweep, row_id in rows:
        if isinstance(summary, str | bytes):
            summary = json.loads(summary)
        if isinstance(summary, dict):
            out.append({**summary, "sweep_id": summary.get("sweep_id", sweep), "_result_id": row_id})
    return out

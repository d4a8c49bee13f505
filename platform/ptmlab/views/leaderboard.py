"""A benchmark's leaderboard view (`benchmark=glue|superglue|tasks|generation`, the table in
ptmlab.contracts.benchmarks): ptmlab.leaderboard's grouping, as JSON for the page (scores on a 0-100
scale; `GET /api/v1/results/<benchmark>` is the same view: GLUE's board every task, the others their
own tasks, SuperGLUE's with its average, tasks and generation without one), with the
results rows behind every cell (a click on a cell opens them), each row's footprint (trainable
parameters, delta size) and an optional filter by adaptation mode. Fine-tunes and multi-task runs
(one cell per task, marked) are read; every run shown is counted, and a cell whose runs share a
seed across different configs says so (`same_seed_runs`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from sqlalchemy.orm import Session

from ptmlab.contracts.benchmarks import BENCHMARKS
from ptmlab.contracts.summaries import FinetuneSummary
from ptmlab.errors import ConfigError
from ptmlab.leaderboard.grouping import (
    DEFAULT_GROUP_BY,
    GLUE_TASKS,
    LEADERBOARD_KINDS,
    METRIC_ABBREV,
    Leaderboard,
    LeaderboardFold,
    LeaderboardRow,
    Stat,
    compare_rows,
)
from ptmlab.leaderboard.rendering import render
from ptmlab.results import cached_view, filter_options, folded
from ptmlab.views.encoded import EncodedList, encode
from ptmlab.views.runs import check_keys


def check_group_keys(session: Session, group_by: Sequence[str]) -> None:
    """A rows-by key that is neither a fine-tune summary field nor a key any stored run has is
    refused naming it (a misspelt `stage.lrr` would otherwise put every run in one "-" row)."""
    check_keys(session, [k for k in group_by if k not in FinetuneSummary.model_fields and k != "sweep_id"], "group_by")


KIND = LEADERBOARD_KINDS  # finetune and multitask results


def _scaled(stat: Stat | None) -> dict[str, Any]:
    if stat is None:
        return {"mean": None, "std": None, "n": 0}
    return {
        "mean": None if stat.mean is None else 100 * stat.mean,
        "std": None if stat.std is None else 100 * stat.std,
        "n": stat.n,
    }


def _key(adaptations: Collection[str] | None) -> tuple[str, ...]:
    return tuple(sorted(adaptations or ()))


def check_benchmark(benchmark: str) -> None:
    """An unknown benchmark is one line naming the valid ones, before any row is read."""
    if benchmark not in BENCHMARKS:
        raise ConfigError(f"benchmark={benchmark} is unknown; valid: {', '.join(BENCHMARKS)}")


def _own_tasks(benchmark: str) -> bool:
    # A benchmark other than GLUE shows its own tasks only (as `ptmlab results superglue`); GLUE's
    # board shows every task, the others outside its average.
    return not BENCHMARKS[benchmark].every_task


def _board(
    session: Session,
    sweep_id: str | None,
    tags: dict[str, str] | None,
    group_by: Sequence[str],
    adaptations: Collection[str] | None,
    benchmark: str,
    read: Callable[[LeaderboardFold, Leaderboard], Any],
    pool: bool = False,
) -> Any:
    """`read(fold, board)` of the leaderboard kept up to date as results arrive (ptmlab.results
    `folded`): a new run rebuilds its own row, not the board."""

    def start() -> LeaderboardFold:
        return LeaderboardFold(
            group_by=group_by,
            kind=KIND,
            adaptations=adaptations,
            benchmark=benchmark,
            own_tasks=_own_tasks(benchmark),
            pool=pool,
        )

    key = ("leaderboard", tuple(group_by), _key(adaptations), benchmark, pool)
    fold, lock = folded(session, KIND, key, start, LeaderboardFold.add, sweep_id=sweep_id, tags=tags)
    with lock:
        return read(fold, fold.board())


def leaderboard_view(
    session: Session,
    *,
    sweep_id: str | None = None,
    tags: dict[str, str] | None = None,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
    adaptations: Collection[str] | None = None,
    benchmark: str = "glue",
    pool: bool = False,
) -> dict[str, Any]:
    check_benchmark(benchmark)
    check_group_keys(session, group_by)
    key = (
        "leaderboard",
        sweep_id,
        tuple(sorted((tags or {}).items())),
        tuple(group_by),
        _key(adaptations),
        benchmark,
        pool,
    )
    return cached_view(
        session, KIND, key, lambda: _leaderboard(session, sweep_id, tags, group_by, adaptations, benchmark, pool)
    )


def _leaderboard(
    session: Session,
    sweep_id: str | None,
    tags: dict[str, str] | None,
    group_by: Sequence[str],
    adaptations: Collection[str] | None,
    benchmark: str = "glue",
    pool: bool = False,
) -> dict[str, Any]:
    # The adaptation filter applies before grouping, so a cell's result ids hold only the selected
    # modes' runs even when the rows are not grouped by adaptation.
    return _board(
        session,
        sweep_id,
        tags,
        group_by,
        adaptations,
        benchmark,
        lambda fold, board: _board_json(session, fold, board, sweep_id, tags, adaptations, benchmark),
        pool,
    )


def _row_json(row: LeaderboardRow) -> dict[str, Any]:
    cells = {}
    for task, cell in row.cells.items():
        # n (in _scaled) counts the runs shown; result_ids are exactly those runs.
        cells[task] = {
            **_scaled(cell.score),
            "metrics": {m: _scaled(s) for m, s in cell.metrics.items()},
            "seeds": [s for s in cell.seeds],
            "flags": list(cell.flags),
            "result_ids": list(cell.result_ids),
            "runs": len(cell.seeds),
            "job_ids": list(cell.job_ids),
            "values": [None if v is None else 100 * v for v in cell.values],
            "varying": list(cell.varying),
            "spread": cell.spread,
            "degenerate": None
            if cell.degenerate is None
            else {**cell.degenerate, "baseline": 100 * cell.degenerate["baseline"]},
            "mixed_configs": cell.same_seed_runs > 0,
            "same_seed_runs": cell.same_seed_runs,
            "multitask": cell.multitask_runs > 0,
            "multitask_runs": cell.multitask_runs,
        }
    return {
        "label": row.label,
        "distinct": dict(row.distinct),
        "config": row.config,
        "cells": cells,
        "flags": row.flags,
        "glue_tasks": row.glue_tasks,
        "glue_average": None if row.glue_average is None else 100 * row.glue_average,
        # the same under the names that hold for any benchmark (the page reads glue_*)
        "average": None if row.average is None else 100 * row.average,
        "average_tasks": row.average_tasks,
        "footprint": row.footprint.as_dict(),
    }


def _board_json(
    session: Session,
    fold: LeaderboardFold,
    board: Leaderboard,
    sweep_id: str | None,
    tags: dict[str, str] | None,
    adaptations: Collection[str] | None,
    benchmark: str,
) -> dict[str, Any]:
    out_rows, texts = [], []
    for row in board.rows:
        key = (tuple(row.config.values()), row.identity)  # rows of one label hold one configuration each
        shown = fold.rendered.get(key)
        # a row a new run changed (the fold built it again), or whose siblings changed what tells it apart
        if shown is None or shown[0] is not row or shown[1]["distinct"] != row.distinct:
            out = _row_json(row)
            shown = fold.rendered[key] = (row, out, encode(out))
        out_rows.append(shown[1])
        texts.append(shown[2])
    return {
        # the board's average: GLUE's (the rows' glue_average, glue_tasks) or SuperGLUE's; none (averaged
        # false: the page leaves the column out) for the boards of task kinds
        "benchmark": {
            "name": board.benchmark.name,
            "display_name": board.benchmark.display_name,
            "averaged": board.benchmark.averaged,
        },
        "group_by": list(board.group_by),
        "pool": fold.pool,
        "tasks": [
            {
                "task": t,
                "name": board.display_name(t),
                "glue": t in GLUE_TASKS,
                "kind": board.task_kinds.get(t),
                "metrics": board.column_metrics(t),
                "metric_labels": [METRIC_ABBREV.get(m, m) for m in board.column_metrics(t)],
            }
            for t in board.tasks
        ],
        "rows": EncodedList(out_rows, texts),
        "result_count": fold.result_count,
        "filters": {
            "sweep_id": sweep_id,
            "tags": dict(tags or {}),
            "adaptation": list(_key(adaptations)),
            "benchmark": benchmark,
        },
        "options": {
            **filter_options(session, KIND),
            "adaptations": sorted(fold.modes),
            "benchmarks": [{"name": b.name, "display_name": b.display_name} for b in BENCHMARKS.values()],
        },
    }


def leaderboard_compare(
    session: Session,
    label_a: str,
    label_b: str,
    *,
    sweep_id: str | None = None,
    tags: dict[str, str] | None = None,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
    adaptations: Collection[str] | None = None,
    benchmark: str = "glue",
    pool: bool = False,
) -> dict:
    """Two rows of the leaderboard compared task by task over their seeds (ptmlab.stats)."""
    check_benchmark(benchmark)
    check_group_keys(session, group_by)
    comparisons = _board(
        session,
        sweep_id,
        tags,
        group_by,
        adaptations,
        benchmark,
        lambda _, board: compare_rows(board, label_a, label_b),
        pool,
    )
    return {"a": label_a, "b": label_b, "comparisons": comparisons}


def leaderboard_compare_export(session: Session, fmt: str, label_a: str, label_b: str, **options: Any) -> str:
    """`leaderboard_compare` as CSV or LaTeX: every figure with its n and its test (or why none)."""
    from ptmlab.leaderboard.rendering import render_comparison

    view = leaderboard_compare(session, label_a, label_b, **options)
    return render_comparison(label_a, label_b, view["comparisons"], fmt)


def leaderboard_export(
    session: Session,
    fmt: str,
    *,
    sweep_id: str | None = None,
    tags: dict[str, str] | None = None,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
    adaptations: Collection[str] | None = None,
    benchmark: str = "glue",
    pool: bool = False,
) -> str:
    """The same leaderboard as CSV or LaTeX (ptmlab.leaderboard's renderers)."""
    check_benchmark(benchmark)
    check_group_keys(session, group_by)

    def build() -> str:
        return _board(
            session, sweep_id, tags, group_by, adaptations, benchmark, lambda _, board: render(board, fmt), pool
        )

    key = (
        "export",
        fmt,
        sweep_id,
        tuple(sorted((tags or {}).items())),
        tuple(group_by),
        _key(adaptations),
        benchmark,
        pool,
    )
    return cached_view(session, KIND, key, build)

"""A sweep (or a study) as a W&B user reads one: per value of each searched key, the mean ± std of
the score over the runs with that value (over seeds where they differ only in their seed; the keys
that differ besides are named otherwise), every run with its keys and score for a parallel-
coordinates plot and for score-against-key plots (a log axis where the values are all positive
and span two decades, or where a study's search space says log), the best run and the best
configuration (mean over its seeds) — marked degenerate when at or below the task's
majority-class baseline — and the top runs whose validation curves the page overlays.

    sweep_view(session, sweep_id) -> dict                     NotFoundError for an unknown sweep
    param_view(runs, keys, *, metric, maximize, log_keys) -> dict   the shared part (the study view uses it)
    job_runs(session, jobs) -> {job id: (result row | None)}       each job's newest result
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Sequence
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ptmlab import queue
from ptmlab.contracts.secrets import redact_tree
from ptmlab.db.models import Job, Result
from ptmlab.queue.claim import result_score
from ptmlab.results import ResultRow, cached_view, is_degenerate, number, row_baseline, row_params, rows_by_id
from ptmlab.settings import secret_literals

TOP_RUNS = 5
LOG_SPAN = 100  # max/min at or above which positive values are drawn on a log axis
# Main metrics a lower value of is better; every other main score is maximised.
LOWER_IS_BETTER = ("loss", "perplexity", "ppl", "error", "wer", "cer")


def maximized(metric: str | None) -> bool:
    name = (metric or "").rsplit("/", 1)[-1].lower()
    return not any(word in name for word in LOWER_IS_BETTER)


def log_scale(values: Sequence[Any]) -> bool:
    """All values positive numbers spanning at least two decades (1e-5 .. 1e-3)."""
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return (
        len(numbers) == len(values)
        and len(numbers) > 1
        and min(numbers) > 0
        and max(numbers) / min(numbers) >= LOG_SPAN
    )


def _value(text: Any) -> Any:
    """An override's value as the config holds it: a number where it reads as one."""
    if not isinstance(text, str):
        return text
    n = number(text)
    if n is None or text.strip().lower() in ("nan", "inf", "-inf", "infinity"):
        return text
    return int(n) if n.is_integer() and "." not in text and "e" not in text.lower() else n


def _value_order(value: Any) -> tuple:
    n = None if isinstance(value, bool) else number(value)
    return (0, n, "") if n is not None else (1, 0.0, str(value))


def job_runs(session: Session, job_ids: Collection[int]) -> dict[int, ResultRow]:
    """Each job's newest result row (a rerun's row is the later one), through the row cache."""
    if not job_ids:
        return {}
    newest = dict(
        session.execute(
            sa.select(Result.job_id, sa.func.max(Result.id))
            .where(Result.job_id.in_(list(job_ids)))
            .group_by(Result.job_id)
        )
        .tuples()
        .all()
    )
    rows = rows_by_id(session, list(newest.values()))
    return {job_id: rows[result_id] for job_id, result_id in newest.items() if result_id in rows}


def run_entry(job: Any, row: ResultRow | None, params: dict[str, Any], *, score: float | None = None) -> dict[str, Any]:
    """One run as the sweep and study pages draw it; `score` defaults to its result's main score."""
    from ptmlab.views.runs import run_label

    summary = row.summary if row is not None else {}
    if score is None and summary:
        score = result_score(summary)
    score = number(score)  # a NaN score ranks nowhere
    baseline = row_baseline(summary)
    seed = summary.get("seed", job.seed)
    return {
        "job_id": job.id,
        "label": run_label(row.id if row else 0, job.id, job.name),
        "seed": seed,
        "status": job.status,
        "params": params,
        "score": score,
        "baseline": None if baseline is None else baseline["value"],
        "degenerate": is_degenerate(score, baseline),
        "metric": summary.get("main_metric"),
        "config_hash": summary.get("config_hash"),
    }


def _stats(members: list[dict[str, Any]], keys: Sequence[str], key: str | None) -> dict[str, Any]:
    scores = [r["score"] for r in members if r["score"] is not None and not math.isnan(r["score"])]
    others = [k for k in keys if k != key]
    varying = [k for k in others if len({repr(r["params"].get(k)) for r in members}) > 1]
    marked = [r for r in members if r["degenerate"]]
    return {
        "n": len(scores),
        "job_ids": [r["job_id"] for r in members],
        "seeds": [r["seed"] for r in members],
        "mean": statistics.fmean(scores) if scores else None,
        "std": statistics.stdev(scores) if len(scores) > 1 else None,
        "min": min(scores, default=None),
        "max": max(scores, default=None),
        # spread over seeds only where the members differ in nothing else that was searched
        "varying": varying,
        "spread": "runs" if varying else "seeds",
        # how many runs sit at or below their majority-class baseline, and the highest such baseline
        "degenerate": len(marked),
        "baseline": max((r["baseline"] for r in marked), default=None),
    }


def per_value_stats(runs: list[dict[str, Any]], key: str, keys: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Each value of `key` (in value order): mean ± sample std, n, min and max of its runs' scores,
    and the other searched keys that differ among them (then the spread is over runs, not seeds)."""
    by_value: dict[str, list[dict[str, Any]]] = {}
    values: dict[str, Any] = {}
    for run in runs:
        value = run["params"].get(key)
        by_value.setdefault(repr(value), []).append(run)
        values[repr(value)] = value
    out = [{"value": values[v], **_stats(members, keys, key)} for v, members in by_value.items()]
    out.sort(key=lambda v: _value_order(v["value"]))
    return out


def _best_of(entries: list[dict[str, Any]], maximize: bool, score: str) -> list[dict[str, Any]]:
    scored = [e for e in entries if e[score] is not None and not math.isnan(e[score])]
    return sorted(scored, key=lambda e: -e[score] if maximize else e[score])


def param_view(
    runs: list[dict[str, Any]],
    keys: Sequence[str],
    *,
    metric: str | None,
    maximize: bool,
    log_keys: Collection[str] = (),
) -> dict[str, Any]:
    """The part of a sweep's and a study's page that ranks its runs by their searched keys."""
    params = []
    for key in keys:
        values = sorted(
            {
                repr(r["params"].get(key)): r["params"].get(key) for r in runs if r["params"].get(key) is not None
            }.values(),
            key=_value_order,
        )
        params.append({"key": key, "values": values, "log_scale": key in log_keys or log_scale(values)})
    configs: dict[str, list[dict[str, Any]]] = {}
    for run in runs:  # runs of one configuration differ only in their seed
        configs.setdefault(repr([run["params"].get(k) for k in keys]), []).append(run)
    by_config = [
        {"params": {k: members[0]["params"].get(k) for k in keys}, **_stats(members, keys, None)}
        for members in configs.values()
    ]
    ranked = _best_of(runs, maximize, "score")
    best = ranked[0] if ranked else None
    best_config = next(iter(_best_of(by_config, maximize, "mean")), None)
    baselines = [r["baseline"] for r in runs if r["baseline"] is not None]
    return {
        "metric": metric,
        "maximize": maximize,
        "baseline": max(baselines) if baselines else None,
        "params": params,
        "runs": runs,
        "per_value": {k: per_value_stats(runs, k, keys) for k in keys},
        "configs": _best_of(by_config, maximize, "mean") + [c for c in by_config if c["mean"] is None],
        "best": None
        if best is None
        else {
            "job_id": best["job_id"],
            "label": best["label"],
            "score": best["score"],
            "params": best["params"],
            "degenerate": best["degenerate"],
            "baseline": best["baseline"],
        },
        "best_config": best_config,
        "top_job_ids": [r["job_id"] for r in ranked[:TOP_RUNS]],
        "all_degenerate": bool(ranked) and all(r["degenerate"] for r in ranked),
    }


def _override_settings(overrides: list[str] | None, secrets: Any) -> dict[str, Any]:
    """{key: value as submitted} of a job's overrides, secrets masked as the job lists mask them."""
    shown = redact_tree(list(overrides or []), secrets)
    return {o.split("=", 1)[0].strip().lstrip("+~"): o.split("=", 1)[1] for o in shown if "=" in o}


def sweep_view(session: Session, sweep_id: str) -> dict[str, Any]:
    """The sweep's page, kept while neither its jobs (count, last change) nor the results change:
    the page polls it every few seconds while the sweep runs."""
    jobs_changed = tuple(
        session.execute(sa.select(sa.func.count(), sa.func.max(Job.updated_at)).where(Job.sweep_id == sweep_id)).one()
    )
    return cached_view(session, None, ("sweep", sweep_id, jobs_changed), lambda: _sweep_view(session, sweep_id))


def _sweep_view(session: Session, sweep_id: str) -> dict[str, Any]:
    sweep = queue.get_sweep(session, sweep_id)  # NotFoundError for an unknown sweep
    # the columns the page needs, not the ORM jobs (each would load its dependencies)
    jobs = [
        SimpleNamespace(**r._mapping)
        for r in session.execute(
            sa.select(Job.id, Job.name, Job.status, Job.seed, Job.overrides)
            .where(Job.sweep_id == sweep_id)
            .order_by(Job.id)
            .limit(10_000)
        )
    ]
    secrets = secret_literals()
    settings = [_override_settings(j.overrides, secrets) for j in jobs]
    # the keys the sweep varies: overrides whose value differs between its jobs (the seed apart)
    keys = sorted({k for s in settings for k in s if k != "seed"})
    keys = [k for k in keys if len({s.get(k) for s in settings}) > 1]
    rows = job_runs(session, [j.id for j in jobs])
    runs = []
    for job, setting in zip(jobs, settings, strict=True):
        row = rows.get(job.id)
        config = row_params(row) if row is not None else {}
        # the value the run's stored config holds (typed), else the override as submitted
        runs.append(run_entry(job, row, {k: config[k] if k in config else _value(setting.get(k)) for k in keys}))
    metric = next((r["metric"] for r in runs if r["metric"]), None)
    return {
        "id": sweep.id,
        "name": sweep.name,
        "jobs": len(jobs),
        **param_view(runs, keys, metric=metric, maximize=maximized(metric)),
    }

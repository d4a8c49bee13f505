"""The studies pages: the list (each study's trials by state and its best) and one study's page
(trials table, optimisation history, parameters against the objective, Optuna's parameter
importances, every trial's intermediate curve; a multi-objective study's Pareto front instead of
the history and the curves). Read from the platform database and Optuna's tables in it
(ptmlab.studies.study_status); nothing heavier than Optuna is imported.

    studies_list_view(session, *, url, limit, offset) -> (items, total)
    study_view(session, study_id, *, url) -> dict       NotFoundError for an unknown id
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import sqlalchemy as sa
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from sqlalchemy.orm import Session

from ptmlab.db import Study
from ptmlab.results import number
from ptmlab.studies import get_study, study_status
from ptmlab.studies.plan import StudyPlan, replan
from ptmlab.studies.spec import stored_spec
from ptmlab.studies.storage import optuna_storage

MIN_TRIALS_FOR_IMPORTANCES = 2


def studies_list_view(session: Session, *, url: str, limit: int = 50, offset: int = 0) -> tuple[list[dict], int]:
    total = session.scalar(sa.select(sa.func.count()).select_from(Study)) or 0
    ids = session.scalars(
        sa.select(Study.id).order_by(Study.created_at.desc(), Study.id).limit(limit).offset(offset)
    ).all()
    items = []
    for study_id in ids:
        status = study_status(session, study_id, url=url)
        spec = stored_spec(status["spec"])
        best = status["best"]
        items.append(
            {
                "id": status["id"],
                "name": status["name"],
                "status": status["status"],
                "stop_reason": status["stop_reason"],
                "created_at": status["created_at"],
                "stage": spec.stage,
                "objective": spec.objective or " · ".join(spec.objectives or []),
                "direction": spec.direction,
                "sampler": spec.sampler,
                "pruner": spec.pruner,
                "n_trials": spec.n_trials,
                "trials": len(status["trials"]),
                "counts": status["counts"],
                "steps_total": status["steps_total"],
                "best": {"number": best["number"], "value": best["value"], "job_id": best["job_id"]} if best else None,
            }
        )
    return items, total


def study_view(session: Session, study_id: str, *, url: str) -> dict[str, Any]:
    status = study_status(session, study_id, url=url)
    # The spec (one stored before a bound existed read as stored, its non-finite numbers as None:
    # study_status, stored_spec) and its search space.
    plan = replan(status["spec"])
    spec = plan.spec
    maximize = spec.direction == "maximize"
    objectives = spec.objectives
    params = _params(plan)  # the search space; `_ranked` adds the values the trials took
    trials = [
        {
            **t,
            "value": number(t["value"]),
            "values": [number(v) for v in t["values"]] if t.get("values") else None,
            "intermediate": [{"validation": int(k), "value": number(v)} for k, v in t["intermediate"].items()],
        }
        for t in status["trials"]
    ]
    complete = [
        t
        for t in trials
        if t["state"] == "complete" and (t["values"] is not None if objectives else t["value"] is not None)
    ]
    importances, why_not = _importances(session, study_id, url, complete, objectives)
    ranked = _ranked(session, trials, params, spec.objective, maximize)
    best_number = status["best"]["number"] if status["best"] else None
    best_run = next((r for r in ranked["runs"] if r["number"] == best_number), None)
    return {
        # a multi-objective study: its objectives, their directions, its Pareto-optimal trials
        "objectives": objectives,
        "directions": spec.directions,
        "pareto": status["pareto"],
        "study": {
            k: status[k]
            for k in (
                "id",
                "name",
                "spec",
                "status",
                "stop_reason",
                "created_at",
                "started_at",
                "finished_at",
                "counts",
                "steps_total",
            )
        },
        "objective": spec.objective,
        "direction": "maximize" if maximize else "minimize",
        "trials": trials,
        **ranked,
        "best": best_number,  # the best trial's number (by Optuna's objective)
        # its run, marked degenerate at or below its majority-class baseline
        "best_run": None
        if best_number is None
        else {
            "number": best_number,
            "job_id": best_run["job_id"] if best_run else None,
            "label": best_run["label"] if best_run else None,
            "score": best_run["score"] if best_run else status["best"]["value"],
            "degenerate": bool(best_run and best_run["degenerate"]),
            "baseline": best_run["baseline"] if best_run else None,
        },
        "history": [] if objectives else _history(complete, maximize),
        "importances": importances,
        "importances_note": why_not,
    }


def _params(plan: StudyPlan) -> list[dict[str, Any]]:
    """The searched keys as the charts need them: a numeric axis (log or linear) or categories."""
    out = []
    for key, dist in plan.space.items():
        if isinstance(dist, CategoricalDistribution):
            out.append({"name": key, "kind": "categorical", "log": False, "choices": list(dist.choices)})
        elif isinstance(dist, FloatDistribution | IntDistribution):
            out.append(
                {
                    "name": key,
                    "kind": "int" if isinstance(dist, IntDistribution) else "float",
                    "log": bool(dist.log),
                    "low": dist.low,
                    "high": dist.high,
                }
            )
    return out


def _ranked(
    session: Session, trials: list[dict], space: list[dict[str, Any]], objective: str | None, maximize: bool
) -> dict[str, Any]:
    """The trials as a sweep's runs (ptmlab.views.sweep `param_view`): per searched value the mean
    ± std of the objective, the runs for parallel coordinates, the top runs; a trial's run is
    degenerate when the objective is its main metric and sits at or below the majority-class
    baseline. `params` keep the search space's description (name, kind, log, bounds) beside
    the values the trials took (key, values, log_scale)."""
    from ptmlab.db.models import Job
    from ptmlab.views.sweep import job_runs, param_view, run_entry

    with_job = [t for t in trials if t.get("job_id") is not None]
    jobs = {j.id: j for j in session.scalars(sa.select(Job).where(Job.id.in_([t["job_id"] for t in with_job])))}
    rows = job_runs(session, list(jobs))
    keys = [p["name"] for p in space]
    measured = (objective or "").rsplit("/", 1)[-1]
    runs = []
    for t in with_job:
        job = jobs.get(t["job_id"])
        if job is None:
            continue
        run = run_entry(job, rows.get(job.id), {k: t["params"].get(k) for k in keys}, score=t["value"])
        run["score"] = t["value"] if t["state"] == "complete" else None  # a pruned trial's last value ranks nowhere
        if run["baseline"] is not None and (run["metric"] or "").rsplit("/", 1)[-1] != measured:
            run["baseline"], run["degenerate"] = None, False  # the objective is not the baseline's metric
        elif run["score"] is None:
            run["degenerate"] = False
        runs.append({"number": t["number"], **run})
    view = param_view(
        runs, keys, metric=objective, maximize=maximize, log_keys={p["name"] for p in space if p.get("log")}
    )
    by_key = {p["key"]: p for p in view["params"]}
    view["params"] = [{**p, **by_key[p["name"]]} for p in space]
    view.pop("best")
    return view


def _history(complete: list[dict], maximize: bool) -> list[dict[str, Any]]:
    """Each complete trial's objective in trial order, with the best so far after it."""
    out, best = [], None
    for t in sorted(complete, key=lambda t: t["number"]):
        if best is None or (t["value"] > best if maximize else t["value"] < best):
            best = t["value"]
        out.append({"number": t["number"], "value": t["value"], "best": best})
    return out


def _importances(
    session: Session, study_id: str, url: str, complete: list[dict], objectives: list[str] | None = None
) -> tuple[dict | None, str | None]:
    if len(complete) < MIN_TRIALS_FOR_IMPORTANCES:
        return None, (
            f"parameter importances need at least {MIN_TRIALS_FOR_IMPORTANCES} complete trials ({len(complete)} so far)"
        )
    optuna_name = get_study(session, study_id).optuna_name
    session.commit()
    # a new complete trial is a new answer
    key = tuple((t["number"], t["value"], tuple(t.get("values") or ())) for t in complete)
    try:
        values, caveat = _cached_importances(url, optuna_name, key, bool(objectives))
        if objectives:  # Optuna's importances judge one target: the first objective's
            caveat = " ".join(filter(None, [f"Importances for {objectives[0]}, the first objective.", caveat]))
        return values, caveat
    except Exception as exc:
        return (
            None,
            f"Optuna could not compute parameter importances: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
        )


@functools.lru_cache(maxsize=64)
def _cached_importances(
    url: str, optuna_name: str, complete_key: tuple, first_objective: bool = False
) -> tuple[dict, str | None]:
    """Optuna's importances (its default evaluator) and the caveat it warned of, if any. Cached by
    the complete trials: a running study's page asks every few seconds, the answer changes only
    when a trial completes."""
    import optuna

    study = optuna.load_study(study_name=optuna_name, storage=optuna_storage(url))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = optuna.importance.get_param_importances(
            study, target=(lambda t: t.values[0]) if first_objective else None
        )
    caveats = [
        str(w.message)
        for w in caught
        if issubclass(w.category, UserWarning)
        # the target is the first objective on purpose; the direction does not change what matters
        and not (first_objective and "`target`" in str(w.message))
    ]
    return {k: float(v) for k, v in values.items()}, (" ".join(caveats) or None)

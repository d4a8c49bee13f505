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
from ptmlab.studies import get_study, study_status
from ptmlab.studies.plan import StudyPlan, replan
from ptmlab.studies.spec import stored_spec
from ptmlab.studies.storage import optuna_storage
from ptmlab.results import number

MIN_TRIALS_FOR_IMPORTANCES = 2


def studies_list_view(session: Session, *, url: str, limit: int = 50, offset: int = 0) -> tuple[list[dict], int]:
    total = session.scalar(sa.select(sa.func.count()).select_from(Study)) or 0
    ids = session.scalars(sa.select(Study.id).order_by(Study.created_at.desc(), Study.id)
                          .limit(limit).offset(offset)).all()
    items = []
    for study_id in ids:
        status = study_status(session, study_id, url=url)
        spec = stored_spec(status["spec"])
        best = status["best"]
        items.append({
            "id": status["id"], "name": status["name"], "status": status["status"],
            "stop_reason": status["stop_reason"], "created_at": status["created_at"],
            "stage": spec.stage, "objective": spec.objective or " · ".join(spec.objectives or []),
            "direction": spec.direction, "sampler": spec.sampler, "pruner": spec.pruner, "n_trials": spec.n_trials,
            "trials": len(status["trials"]), "counts": status["counts"], "steps_total": status["steps_total"],
            "best": {"number": best["number"], "value": best["value"], "job_id": best["job_id"]} if best else None,
        })
    return items, total


def study_view(session: Session, study_id: str, *, url: str) -> dict[str, Any]:
    status = study_status(session, study_id, url=url)
    # The spec (one stored before a bound existed read as stored, its non-finite numbers as None:
    # study_status, stored_spec) and its search space.
    plan = replan(status["spec"])
    spec = plan.spec
    maximize = spec.direction == "maximize"
    objectives = spec.objectives
    params = _params(plan)
    trials = [{**t, "value": number(t["value"]),
               "values": [number(v) for v in t["values"]] if t.get("values") else None,
               "intermediate": [{"validation": int(k), "value": number(v)} for k, v in t["intermediate"].items()]}
              for t in status["trials"]]
    complete = [t for t in trials if t["state"] == "complete"
                and (t["values"] is not None if objectives else t["value"] is not None)]
    importances, why_not = _importances(session, study_id, url, complete, objectives)
    return {
        # a multi-objective study: its objectives, their directions, its Pareto-optimal trials
        "objectives": objectives, "directions": spec.directions, "pareto": status["pareto"],
        "study": {k: status[k] for k in ("id", "name", "spec", "status", "stop_reason", "created_at", "started_at",
                                         "finished_at", "counts", "steps_total")},
        "objective": spec.objective, "direction": "maximize" if maximize else "minimize",
        "params": params, "trials": trials,
        "best": status["best"]["number"] if status["best"] else None,
        "history": [] if objectives else _history(complete, maximize),
        "importances": importances, "importances_note": why_not,
    }


def _params(plan: StudyPlan) -> list[dict[str, Any]]:
    """The searched keys as the charts need them: a numeric axis (log or linear) or categories."""
    out = []
    for key, dist in plan.space.items():
        if isinstance(dist, CategoricalDistribution):
            out.append({"name": key, "kind": "categorical", "log": False, "choices": list(dist.choices)})
        elif isinstance(dist, FloatDistribution | IntDistribution):
            out.append({"name": key, "kind": "int" if isinstance(dist, IntDistribution) else "float",
                        "log": bool(dist.log), "low": dist.low, "high": dist.high})
    return out


def _history(complete: list[dict], maximize: bool) -> list[dict[str, Any]]:
    """Each complete trial's objective in trial order, with the best so far after it."""
    out, best = [], None
    for t in sorted(complete, key=lambda t: t["number"]):
        if best is None or (t["value"] > best if maximize else t["value"] < best):
            best = t["value"]
        out.append({"number": t["number"], "value": t["value"], "best": best})
    return out


def _importances(session: Session, study_id: str, url: str, complete: list[dict],
                 objectives: list[str] | None = None) -> tuple[dict | None, str | None]:
    if len(complete) < MIN_TRIALS_FOR_IMPORTANCES:
        return None, (f"parameter importances need at least {MIN_TRIALS_FOR_IMPORTANCES} complete trials "
                      f"({len(complete)} so far)")
    optuna_name = get_study(session, study_id).optuna_name
    session.commit()
    # a new complete trial is a new answer
    key = tuple((t["number"], t["value"], tuple(t.get("values") or ())) for t in complete)
    try:
        values, caveat = _cached_importances(url, optuna_name, key, bool(objectives))
        if objectives:  # Optuna's importances judge one target: the first objective's
            caveat = " ".join(filter(None, [f"Importances for {objectives[0]}, the first objective.", caveat]))
        return values, caveat
    except Exception as exc:  # noqa: BLE001 - Optuna's evaluators raise what they raise; the page says why
        return None, f"Optuna could not compute parameter importances: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


@functools.lru_cache(maxsize=64)
def _cached_importances(url: str, optuna_name: str, complete_key: tuple, first_objective: bool = False
                        ) -> tuple[dict, str | None]:
    """Optuna's importances (its default evaluator) and the caveat it warned of, if any. Cached by
    the complete trials: a running study's page asks every few seconds, the answer changes only
    when a trial completes."""
    import optuna

    study = optuna.load_study(study_name=optuna_name, storage=optuna_storage(url))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = optuna.importance.get_param_importances(
            study, target=(lambda t: t.values[0]) if first_objective else None)
    caveats = [str(w.message) for w in caught if issubclass(w.category, UserWarning)
               # the target is the first objective on purpose; the direction does not change what matters
               and not (first_objective and "`target`" in str(w.message))]
    return {k: float(v) for k, v in values.items()}, (" ".join(caveats) or None)

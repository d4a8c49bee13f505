"""A study as the API, the CLI and the dashboard show it: its trials (state, params, objective,
steps trained, job), the best trial, steps in all, the counts by state. A multi-objective study
has no best trial but a Pareto set (Optuna's `best_trials`): each trial's `values` (one per
objective) and whether it is on the front (`pareto`)."""

from __future__ import annotations

from typing import Any

import optuna
from sqlalchemy.orm import Session

from ptmlab.studies.driver import WITHDRAWN, _jobs, get_study
from ptmlab.studies.objective import steps_trained
from ptmlab.studies.spec import finite
from ptmlab.studies.storage import optuna_storage


def study_status(session: Session, study_id: str, *, url: str) -> dict[str, Any]:
    study = get_study(session, study_id)
    jobs = _jobs(session, study_id)
    session.commit()
    ostudy = optuna.load_study(study_name=study.optuna_name, storage=optuna_storage(url))
    multi = study.spec.get("objectives") is not None
    pareto = {t.number for t in ostudy.best_trials} if multi else set()
    trials = []
    for t in ostudy.get_trials(deepcopy=False):
        job = jobs.get(t.number)
        state = "withdrawn" if t.user_attrs.get(WITHDRAWN) else t.state.name.lower()
        trials.append(
            {
                "number": t.number,
                "state": state,
                "params": dict(t.params),
                # FrozenTrial.value raises for several objectives: read `values`
                "value": None if multi or not t.values else t.values[0],
                "values": list(t.values) if multi and t.values else None,
                "pareto": t.number in pareto,
                "intermediate": {str(k): v for k, v in sorted(t.intermediate_values.items())},
                "steps": steps_trained(job.progress) if job is not None else 0,
                "job_id": job.id if job is not None else None,
                "job_status": job.status if job is not None else None,
            }
        )
    complete = [t for t in trials if t["state"] == "complete" and t["value"] is not None]
    best = None
    if complete and not multi:
        pick = max if study.spec.get("direction", "maximize") == "maximize" else min
        best = pick(complete, key=lambda t: t["value"])
    counts: dict[str, int] = {}
    for t in trials:
        counts[t["state"]] = counts.get(t["state"], 0) + 1
    # spec: an Infinity stored before the bounds would make every answer unserialisable
    return {
        **study.to_dict(),
        "spec": finite(dict(study.spec or {})),
        "trials": trials,
        "best": best,
        "pareto": sorted(pareto),
        "counts": counts,
        "steps_total": sum(t["steps"] for t in trials),
    }

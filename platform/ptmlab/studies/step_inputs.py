"""Everything a driver step reads, as one digest: a worker skips its heartbeat's step of a study
when the digest is the one it left after its own last step (nothing to report, prune, tell or ask).

A step loads every trial through Optuna's RDB storage several times (sampler, pruner, budget,
counts): 0.3-0.4 CPU-s at 16-32 trials, growing with the trials, on every heartbeat of every
worker. Measured in the ASHA test (two workers, two studies): the workers spent 14 % of a core,
86 % of it in that step, while the jobs they ran waited for the cores.

The digest holds what `driver._advance` acts on: the study's row (status, a resume's new start),
Optuna's trials counted by state (a trial asked, told or withdrawn by any driver, also one that
died between ask and submit), and per trial job its status, cancel flag and objective curve (the
pruner's input), its steps when a step budget is set, and whether the wall-clock budget has run
out. `RECHECK_S` bounds what a change outside it could cost: a step runs at least that often.
"""

from __future__ import annotations

import hashlib
import json
import time

import sqlalchemy as sa
from optuna.storages._rdb.models import StudyModel, TrialModel
from sqlalchemy.orm import Session

from ptmlab.db import Job, Study, utcnow
from ptmlab.studies.objective import objective_points, steps_trained

RECHECK_S = 60.0

# (database url, study id) -> (digest after this process's last step, when, monotonic)
_left: dict[tuple[str, str], tuple[str, float]] = {}


def step_inputs_digest(session: Session, study_id: str) -> str | None:
    """The digest of what a step of `study_id` reads now (None: no such study)."""
    study = session.get(Study, study_id, populate_existing=True)
    if study is None:
        return None
    spec = study.spec or {}
    objective = str(spec.get("objective"))
    max_steps, max_wall_s = spec.get("max_steps"), spec.get("max_wall_s")
    wall_out = (
        max_wall_s is not None
        and study.started_at is not None
        and ((utcnow() - study.started_at).total_seconds() >= float(max_wall_s))
    )
    # Optuna's own tables (migration 0004 created them from these models): trials counted per state.
    trial_states = session.execute(
        sa.select(TrialModel.state, sa.func.count())
        .join(StudyModel, TrialModel.study_id == StudyModel.study_id)
        .where(StudyModel.study_name == study.optuna_name)
        .group_by(TrialModel.state)
    ).all()
    jobs = session.execute(
        sa.select(Job.id, Job.trial_number, Job.status, Job.cancel_requested, Job.progress)
        .where(Job.study_id == study_id)
        .order_by(Job.id)
    ).all()
    session.rollback()
    blob = {
        "study": [study.status, str(study.started_at), wall_out],
        "trials": sorted([str(state), n] for state, n in trial_states),
        "jobs": [
            [
                j.id,
                j.trial_number,
                j.status,
                j.cancel_requested,
                objective_points(j.progress, objective),
                steps_trained(j.progress) if max_steps is not None else None,
            ]
            for j in jobs
        ],
    }
    return hashlib.sha256(json.dumps(blob, default=str).encode()).hexdigest()


def unchanged_since_own_step(session: Session, url: str, study_id: str) -> bool:
    left = _left.get((url, study_id))
    if left is None or time.monotonic() - left[1] >= RECHECK_S:
        return False
    return step_inputs_digest(session, study_id) == left[0]


def remember_step(session: Session, url: str, study_id: str) -> None:
    """After this process's own step: what it left, so the next heartbeat can skip."""
    digest = step_inputs_digest(session, study_id)
    if digest is not None:
        _left[(url, study_id)] = (digest, time.monotonic())

"""Driving a study: from the trials' jobs to Optuna and back (ask-and-tell).

`advance_study` is one idempotent step computed from what the database holds, so whoever runs it
(the API when a study is created or resumed, every worker at each heartbeat and when a job ends)
and however often, each trial is told once:

1. every running Optuna trial has its job (a driver that died between ask and submit left one
   without: it is submitted now, under an idempotency key, so never twice);
2. each new validation in a running trial's progress becomes an intermediate value (step = the
   validation's number), and the pruner judges it; a trial it prunes has its job stopped through
   the queue's cancel path, ending `pruned` with its partial curve kept;
3. a trial whose job ended is told: succeeded → its last objective value (a multi-objective
   study: each objective read from the job's stored summary), pruned → PRUNED, failed or
   cancelled → FAIL;
4. the budget (trials, wall-clock, total training steps): the first one reached stops the asking,
   withdraws queued trials and stops running ones;
5. new trials are asked until `n_parallel` are in flight, each queued as a job tagged with the
   study and trial number.

A killed worker's trial is the same job requeued by the lease reaper: same trial, told once.
"""

from __future__ import annotations

import datetime as dt
import logging

import optuna
import sqlalchemy as sa
from optuna.trial import TrialState
from sqlalchemy.orm import Session

from ptmlab.db import CANCELLED, FAILED, PRUNED, QUEUED, RUNNING, SUCCEEDED, Job, Result, Study, utcnow
from ptmlab.db.models import short_id
from ptmlab.errors import ConfigError, ConflictError, NotFoundError
from ptmlab.queue import submit_job
from ptmlab.studies.objective import final_value, is_last_step, objective_points, steps_trained, summary_value
from ptmlab.studies.plan import StudyPlan, replan
from ptmlab.studies.spec import MAX_PARALLEL
from ptmlab.studies.step_inputs import remember_step, unchanged_since_own_step
from ptmlab.studies.storage import make_pruner, make_sampler, optuna_storage

log = logging.getLogger(__name__)

DRIVER_LEASE_S = 20.0  # a step takes well under a second; a driver killed holding it delays the study this long
WITHDRAWN = "withdrawn"  # a trial's user attr: it never ran to an end, so it does not count
STUDY_RUNNING, STUDY_STOPPED, STUDY_FINISHED = "running", "stopped", "finished"


def create_study(
    session: Session, plan: StudyPlan, *, url: str, driver_id: str = "api", submitted_remotely: bool = False
) -> Study:
    spec = plan.spec
    study_id = short_id()
    study = Study(
        id=study_id,
        name=spec.name,
        optuna_name=f"ptmlab-{study_id}",
        spec=spec.model_dump(),
        status=STUDY_RUNNING,
        submitted_remotely=submitted_remotely,
    )
    session.add(study)
    session.commit()  # Optuna writes through its own connections: never while we hold SQLite's lock
    if spec.multi_objective:
        optuna.create_study(storage=optuna_storage(url), study_name=study.optuna_name, directions=spec.directions)
    else:
        optuna.create_study(storage=optuna_storage(url), study_name=study.optuna_name, direction=spec.direction)
    advance_study(session, study.id, url=url, driver_id=driver_id)
    return study


def advance_running_studies(session: Session, *, url: str, driver_id: str) -> set[int]:
    """Advance every running study that changed since this process's own last step of it
    (step_inputs.py); the ids of the jobs whose stop it asked for (a worker kills its own at once
    instead of at its next heartbeat: each second is training steps spent)."""
    ids = session.scalars(sa.select(Study.id).where(Study.status == STUDY_RUNNING)).all()
    session.rollback()
    stopped: set[int] = set()
    for study_id in ids:
        if unchanged_since_own_step(session, url, study_id):
            continue
        stopped |= advance_study(session, study_id, url=url, driver_id=driver_id, remember=True)
    return stopped


def advance_study(session: Session, study_id: str, *, url: str, driver_id: str, remember: bool = False) -> set[int]:
    """One step of the study (see the module docstring): the ids of the running jobs it asked to
    stop; nothing when another driver holds the study. `remember`: keep what the step left, so
    `advance_running_studies` skips the study until something changes."""
    if not _take_lease(session, study_id, driver_id):
        return set()
    stopped: set[int] = set()
    try:
        _advance(session, session.get(Study, study_id, populate_existing=True), url, stopped)
        if remember:
            remember_step(session, url, study_id)
    except ConfigError as exc:
        # A spec stored before its bounds existed (gpus 1e9, ...): its trials can never be queued, so
        # the study stops, saying why, rather than failing at every worker's heartbeat.
        session.rollback()
        stop_study(session, study_id, url=url, reason=f"its trials cannot be queued: {exc}")
        log.warning("study %s stopped: its trials cannot be queued: %s", study_id, exc)
    finally:
        session.rollback()
        session.execute(
            sa.update(Study).where(Study.id == study_id, Study.driver_id == driver_id).values(driver_until=None)
        )
        session.commit()
    return stopped


def _take_lease(session: Session, study_id: str, driver_id: str) -> bool:
    now = utcnow()
    taken = session.execute(
        sa.update(Study)
        .where(
            Study.id == study_id,
            Study.status == STUDY_RUNNING,
            sa.or_(Study.driver_until.is_(None), Study.driver_until < now, Study.driver_id == driver_id),
        )
        .values(driver_id=driver_id, driver_until=now + dt.timedelta(seconds=DRIVER_LEASE_S))
    ).rowcount
    session.commit()
    return taken == 1


def _load(study: Study, url: str, plan: StudyPlan, asked: int | None = None) -> optuna.Study:
    storage = optuna_storage(url)
    if asked is None:
        asked = len(storage.get_all_trials(storage.get_study_id_from_name(study.optuna_name), deepcopy=False))
    return optuna.load_study(
        study_name=study.optuna_name,
        storage=storage,
        sampler=make_sampler(plan.spec, plan.space, asked),
        pruner=make_pruner(plan.spec),
    )


def _jobs(session: Session, study_id: str) -> dict[int, Job]:
    jobs = session.scalars(
        sa.select(Job).where(Job.study_id == study_id).execution_options(populate_existing=True)
    ).all()
    return {j.trial_number: j for j in jobs}


def _advance(session: Session, study: Study, url: str, stopped: set[int]) -> None:
    plan = replan(study.spec)
    ostudy = _load(study, url, plan)
    storage = ostudy._storage
    jobs = _jobs(session, study.id)
    session.commit()
    for trial in ostudy.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        job = jobs.get(trial.number)
        if job is None:
            jobs[trial.number] = _submit_trial(session, study, plan, trial, storage)
            continue
        if not plan.spec.multi_objective:  # its objectives come at the end, from the summary
            _report(session, ostudy, trial, job, plan, stopped)
        if job.status in (SUCCEEDED, FAILED, CANCELLED, PRUNED):
            _tell(session, ostudy, trial, job, plan)
    session.commit()

    reason = _budget_reached(study, plan, ostudy, jobs)
    running = ostudy.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if reason is not None and reason != "n_trials":
        for trial in running:
            _withdraw(session, storage, trial, jobs.get(trial.number), f"study {study.id}: {reason} reached", stopped)
        running = []
    if reason is None:
        ostudy = _load(study, url, plan)
        # Counted as the trials are asked, not read back each time: each read is all the study's trials.
        asked, counted = len(ostudy.get_trials(deepcopy=False)), _counted(ostudy)
        # A study stored before n_parallel was bounded still asks at most MAX_PARALLEL per step.
        in_flight = min(plan.spec.n_parallel, MAX_PARALLEL)
        while len(running) < in_flight and counted < plan.n_trials:
            trial = ostudy.ask(fixed_distributions=plan.space)
            jobs[trial.number] = _submit_trial(session, study, plan, storage.get_trial(trial._trial_id), storage)
            running.append(trial)
            if trial.number >= asked:  # a new trial (a resumed study's enqueued ones exist already)
                asked, counted = trial.number + 1, counted + 1
            ostudy.sampler = make_sampler(plan.spec, plan.space, asked)  # the next ask with the seed moved on
        if counted >= plan.n_trials:
            reason = "n_trials"
    if reason is not None and not ostudy.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study = session.get(Study, study.id, populate_existing=True)
        study.status, study.stop_reason, study.finished_at = STUDY_FINISHED, f"{reason} reached", utcnow()
        session.commit()
        log.info("study %s finished: %s reached", study.id, reason)


def _counted(ostudy: optuna.Study) -> int:
    """Trials that count against n_trials: all but those withdrawn (stopped before an end)."""
    return sum(1 for t in ostudy.get_trials(deepcopy=False) if not t.user_attrs.get(WITHDRAWN))


def _submit_trial(session: Session, study: Study, plan: StudyPlan, trial: optuna.trial.FrozenTrial, storage) -> Job:
    spec = plan.spec
    job = submit_job(
        session,
        stage=spec.stage,
        overrides=plan.overrides_for(trial.params),
        seed=spec.job_seed,
        queue=spec.queue,
        priority=spec.priority,
        gpus=spec.gpus,
        timeout_s=spec.timeout_s,
        idempotency_key=f"study:{study.id}:trial:{trial.number}",
        tags={"study_id": study.id, "trial": trial.number},
        study_id=study.id,
        trial_number=trial.number,
        submitted_remotely=study.submitted_remotely,
    )
    storage.set_trial_user_attr(trial._trial_id, "job_id", job.id)
    log.info("study %s: trial %d queued as job %d %s", study.id, trial.number, job.id, trial.params)
    return job


def _report(
    session: Session,
    ostudy: optuna.Study,
    trial: optuna.trial.FrozenTrial,
    job: Job,
    plan: StudyPlan,
    stopped: set[int],
) -> None:
    """New validations → intermediate values, each judged by the pruner as it arrives."""
    storage = ostudy._storage
    points = objective_points(job.progress, plan.spec.objective)
    judged = set(trial.intermediate_values)
    for k, (step, value) in enumerate(points, start=1):
        if k in judged:
            continue
        storage.set_trial_intermediate_value(trial._trial_id, k, value)
        if job.status != RUNNING or job.cancel_requested or plan.spec.pruner == "none":
            continue
        if is_last_step(job.progress, step):
            continue  # trained to the end already: the trial completes, it is not pruned
        if ostudy.pruner.prune(ostudy, storage.get_trial(trial._trial_id)):
            _prune_job(
                session,
                job,
                stopped,
                f"pruned by study {job.study_id} ({plan.spec.pruner}) at validation {k}: "
                f"{plan.spec.objective}={value:g}",
            )
            break


def _prune_job(session: Session, job: Job, stopped: set[int], reason: str) -> None:
    job = session.get(Job, job.id, populate_existing=True)
    if job.status == QUEUED:  # never started: withdrawn at once
        job.status, job.finished_at, job.error = PRUNED, utcnow(), reason
    elif job.status == RUNNING:
        # The queue's cancel path: the worker kills it at its next heartbeat; it ends `pruned`.
        job.cancel_requested, job.cancel_as, job.error = True, PRUNED, reason
        stopped.add(job.id)
    session.commit()
    log.info("job %d: %s", job.id, reason)


def _tell(session: Session, ostudy: optuna.Study, trial: optuna.trial.FrozenTrial, job: Job, plan: StudyPlan) -> None:
    storage = ostudy._storage
    storage.set_trial_user_attr(trial._trial_id, "steps", steps_trained(job.progress))
    storage.set_trial_user_attr(trial._trial_id, "job_status", job.status)
    if job.status == SUCCEEDED and plan.spec.multi_objective:
        values = _summary_values(session, job, plan.spec.objective_names)
        missing = [name for name, v in zip(plan.spec.objective_names, values, strict=True) if v is None]
        if not missing:
            ostudy.tell(trial.number, values)
            return
        storage.set_trial_user_attr(trial._trial_id, "error", f"job {job.id}'s summary has no {', '.join(missing)}")
    elif job.status == SUCCEEDED:
        value = final_value(job.progress, plan.spec.objective)
        if value is not None:
            ostudy.tell(trial.number, value)
            return
        storage.set_trial_user_attr(trial._trial_id, "error", f"job {job.id} left no {plan.spec.objective}")
    elif job.status == PRUNED:
        ostudy.tell(trial.number, state=TrialState.PRUNED)
        return
    ostudy.tell(trial.number, state=TrialState.FAIL)


def _summary_values(session: Session, job: Job, names: list[str]) -> list[float | None]:
    """The objectives from the job's stored summary (the worker stores it as the job succeeds)."""
    summary = session.scalar(
        sa.select(Result.summary).where(Result.job_id == job.id).order_by(Result.id.desc()).limit(1)
    )
    session.commit()
    return [summary_value(summary, name) for name in names]


def _withdraw(
    session: Session, storage, trial: optuna.trial.FrozenTrial, job: Job | None, reason: str, stopped: set[int]
) -> None:
    """A trial the study no longer wants: its job withdrawn (queued) or stopped (running)."""
    if job is not None:
        job = session.get(Job, job.id, populate_existing=True)
        if job.status == QUEUED:
            job.status, job.finished_at, job.error = CANCELLED, utcnow(), f"withdrawn: {reason}"
        elif job.status == RUNNING and not job.cancel_requested:
            job.cancel_requested, job.error = True, f"stopped: {reason}"
            stopped.add(job.id)
        session.commit()
        storage.set_trial_user_attr(trial._trial_id, "steps", steps_trained(job.progress))
    storage.set_trial_user_attr(trial._trial_id, WITHDRAWN, reason)
    storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)


def _budget_reached(study: Study, plan: StudyPlan, ostudy: optuna.Study, jobs: dict[int, Job]) -> str | None:
    spec = plan.spec
    if spec.max_wall_s is not None and (utcnow() - study.started_at).total_seconds() >= spec.max_wall_s:
        return "max_wall_s"
    if spec.max_steps is not None and sum(steps_trained(j.progress) for j in jobs.values()) >= spec.max_steps:
        return "max_steps"
    if _counted(ostudy) >= plan.n_trials and not ostudy.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        return "n_trials"
    return None


# -- stop, resume -------------------------------------------------------------------------------
def stop_study(session: Session, study_id: str, *, url: str, reason: str = "stopped by request") -> Study:
    study = get_study(session, study_id)
    if study.status != STUDY_RUNNING:
        raise ConflictError(f"study {study_id} is {study.status}; only a running study can be stopped")
    study.status, study.stop_reason, study.finished_at = STUDY_STOPPED, reason, utcnow()
    session.commit()
    plan = replan(study.spec)
    ostudy = _load(study, url, plan)
    jobs = _jobs(session, study_id)
    session.commit()
    for trial in ostudy.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        _withdraw(session, ostudy._storage, trial, jobs.get(trial.number), f"study {study_id} stopped", set())
    return study


def resume_study(session: Session, study_id: str, *, url: str, driver_id: str = "api") -> Study:
    study = get_study(session, study_id)
    if study.status == STUDY_RUNNING:
        raise ConflictError(f"study {study_id} is running already")
    study.status, study.stop_reason, study.finished_at = STUDY_RUNNING, None, None
    study.started_at = utcnow()  # the wall-clock budget counts from the resume
    study.driver_id = study.driver_until = None
    session.commit()
    # The trials the stop withdrew run again with the same parameters (a grid's points included:
    # the grid sampler counts a failed trial's point as visited), each once.
    ostudy = _load(study, url, replan(study.spec))
    trials = ostudy.get_trials(deepcopy=False)
    retried = {t.user_attrs.get("retry_of") for t in trials}
    for t in trials:
        if t.user_attrs.get(WITHDRAWN) and t.number not in retried:
            ostudy.enqueue_trial(dict(t.params), user_attrs={"retry_of": t.number}, skip_if_exists=False)
    advance_study(session, study_id, url=url, driver_id=driver_id)
    return get_study(session, study_id)


def get_study(session: Session, study_id: str) -> Study:
    study = session.get(Study, study_id, populate_existing=True)
    if study is None:
        raise NotFoundError(f"study {study_id} not found")
    return study

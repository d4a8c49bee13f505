"""The worker side of the queue: claim, heartbeat, finish, requeue, and the lease reaper.

Claiming is one transaction that picks the best claimable job and marks it running. Two
workers can never claim the same job: on PostgreSQL the candidate row is taken with
`SELECT ... FOR UPDATE SKIP LOCKED` (a second claimer skips it and takes the next one); on
SQLite every transaction is `BEGIN IMMEDIATE` (ptmlab.db), so claims are serialised by the
database's write lock. A running job holds a lease that its worker's heartbeats renew; when a
worker dies the lease expires and the reaper (run by every worker) puts the job back in the queue
with `resume=true`, or fails it once `max_attempts` attempts were started. Leases are stamped and
judged by the database's clock (ptmlab.queue.lease), and a worker never reaps the jobs it runs.
"""

from __future__ import annotations

import datetime as dt
import socket
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, aliased

from ptmlab.contracts.summaries import StageSummary
from ptmlab.db.models import (
    CANCELLED,
    FAILED,
    LOST,
    PRUNED,
    QUEUED,
    REQUEUED,
    RUNNING,
    SUCCEEDED,
    Attempt,
    Job,
    JobDependency,
    Result,
    Worker,
    utcnow,
)
from ptmlab.errors import ConfigError
from ptmlab.queue.jobs import fail_descendants, split_override, value_refs
from ptmlab.queue.lease import db_now, lease_until
from ptmlab.queue.varied_keys import varied_keys
from ptmlab.results import new_result

OUTCOMES = (SUCCEEDED, FAILED, CANCELLED)


@dataclass
class ClaimedJob:
    """What a worker needs to run one attempt (a snapshot: no ORM object crosses the boundary)."""

    job_id: int
    attempt_id: int
    attempt_number: int
    stage: str
    overrides: list[str]  # `job:` references already resolved to paths
    seed: int
    resume: bool
    gpus: int
    timeout_s: float | None
    run_dir: str
    log_path: str
    gpu_ids: list[int] = field(default_factory=list)  # granted (when the worker passed its free ids)
    nodes: int = 1  # > 1: launched across hosts through srun (a --multinode worker)
    study_id: str | None = None  # a study's trial: its end advances the study at once
    varied_keys: list[str] = field(default_factory=list)  # what its sweep or study varies (ptmlab.queue.varied_keys)
    submitted_remotely: bool = False  # queued through the API: the worker checks it as the API did

    def run_overrides(self) -> list[str]:
        """The arguments after `python -m ptmlab.run`."""
        tail = [f"hydra.run.dir={self.run_dir}", f"seed={self.seed}"]
        if self.resume:
            tail.append("resume=true")
        return [f"stage={self.stage}", *self.overrides, *tail]


@dataclass
class HeartbeatReply:
    cancel: set[int] = field(default_factory=set)  # cancel requested: kill these
    lost: set[int] = field(default_factory=set)  # no longer ours (lease expired, reaped): kill these


def _is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def worker_identity() -> tuple[str, int]:
    import os

    return socket.gethostname(), os.getpid()


def register_worker(
    session: Session,
    *,
    worker_id: str,
    gpus: list[int],
    cpu_slots: int,
    queues: list[str],
    multinode: bool = False,
    slurm_job_id: str | None = None,
    slurm_node: str | None = None,
    ends_at: dt.datetime | None = None,
) -> Worker:
    host, pid = worker_identity()
    worker = session.get(Worker, worker_id) or Worker(id=worker_id)
    worker.hostname, worker.pid, worker.gpus, worker.cpu_slots = host, pid, list(gpus), int(cpu_slots)
    worker.multinode, worker.slurm_job_id, worker.slurm_node = bool(multinode), slurm_job_id, slurm_node
    worker.ends_at = ends_at
    worker.queues, worker.status = list(queues), "active"
    worker.started_at = worker.last_heartbeat = utcnow()
    session.add(worker)
    session.commit()
    return worker


def stop_worker(session: Session, worker_id: str, status: str = "stopped") -> None:
    session.execute(sa.update(Worker).where(Worker.id == worker_id).values(status=status, last_heartbeat=utcnow()))
    session.commit()


def claim_next_job(
    session: Session,
    *,
    worker_id: str,
    queues: list[str],
    free_gpus: int | list[int],
    free_cpu_slots: int,
    lease_s: float,
    jobs_root: str | Path,
    multinode: bool = False,
) -> ClaimedJob | None:
    """Atomically claim the highest-priority (then oldest) queued job of `queues` whose parents
    all succeeded and that fits: a GPU job needs `gpus <= free_gpus`, a CPU job (gpus=0) a free
    CPU slot. `free_gpus` is a count, or the free GPU ids (the first `gpus` of them are granted
    and recorded on the attempt). None when nothing fits.

    A multi-node job (nodes > 1) runs on hosts Slurm allocates, not on the worker's own: only a
    `multinode` worker claims it, for one of its CPU slots (a slot = one `srun` it supervises),
    and such a worker claims nothing else."""
    free_gpu_ids = list(free_gpus) if isinstance(free_gpus, list | tuple) else []
    free_gpus = len(free_gpu_ids) if isinstance(free_gpus, list | tuple) else int(free_gpus)
    if free_gpus <= 0 and free_cpu_slots <= 0:
        return None
    parent = aliased(Job)
    unfinished_parent = (
        sa.select(JobDependency.parent_id)
        .join(parent, parent.id == JobDependency.parent_id)
        .where(JobDependency.job_id == Job.id, parent.status != SUCCEEDED)
        .exists()
    )
    fits = []
    if multinode:
        if free_cpu_slots <= 0:
            return None
        fits.append(Job.nodes > 1)
    else:
        if free_cpu_slots > 0:
            fits.append(sa.and_(Job.gpus == 0, Job.nodes <= 1))
        if free_gpus > 0:
            fits.append(sa.and_(Job.gpus > 0, Job.gpus <= free_gpus, Job.nodes <= 1))
    query = (
        sa.select(Job)
        .where(Job.status == QUEUED, Job.queue.in_(list(queues)), sa.or_(*fits), ~unfinished_parent)
        .order_by(Job.priority.desc(), Job.id.asc())
        .limit(1)
        .execution_options(populate_existing=True)
    )
    if _is_postgres(session):
        query = query.with_for_update(skip_locked=True, of=Job)
    job = session.scalar(query)
    if job is None:
        session.rollback()
        return None

    now = utcnow()
    job_dir = Path(jobs_root) / str(job.id)
    # Attempt rows are numbered over the job's whole life; job.attempts counts since the last retry.
    number = (session.scalar(sa.select(sa.func.max(Attempt.number)).where(Attempt.job_id == job.id)) or 0) + 1
    try:
        overrides = _resolve_job_refs(session, job)
    except ConfigError as exc:
        # A parent that succeeded without a run folder cannot feed its child: fail, don't loop.
        job.status, job.error, job.finished_at = FAILED, str(exc), now
        fail_descendants(session, job)
        session.commit()
        return None
    job.status, job.worker_id, job.attempts = RUNNING, worker_id, job.attempts + 1
    job.lease_expires_at = lease_until(session, lease_s)
    job.started_at = job.started_at or now
    job.run_dir = str(job_dir / "run")
    job.exit_code = job.error = None
    attempt = Attempt(
        job_id=job.id,
        number=number,
        worker_id=worker_id,
        status=RUNNING,
        started_at=now,
        log_path=str(job_dir / "logs" / f"attempt-{number}.log"),
        argv=overrides,
        gpu_ids=[] if multinode else free_gpu_ids[: job.gpus],
    )
    session.add(attempt)
    session.flush()
    claimed = ClaimedJob(
        job_id=job.id,
        attempt_id=attempt.id,
        attempt_number=number,
        stage=job.stage,
        overrides=overrides,
        seed=job.seed,
        resume=job.resume,
        gpus=job.gpus,
        timeout_s=job.timeout_s,
        run_dir=job.run_dir,
        log_path=attempt.log_path,
        gpu_ids=list(attempt.gpu_ids),
        nodes=job.nodes,
        study_id=job.study_id,
        varied_keys=varied_keys(session, job),
        submitted_remotely=job.submitted_remotely,
    )
    session.commit()
    return claimed


def _resolve_job_refs(session: Session, job: Job) -> list[str]:
    """`key=job:<id>` -> `key=<the parent's run folder>` (checkpoints/, hf/, summary.json);
    `key=job:best:<id>|<id>` -> the run folder of the listed parent with the best score."""
    out = []
    for o in job.overrides:
        kv = split_override(o)
        refs = value_refs(kv[1]) if kv else []
        if not refs:
            out.append(o)
            continue
        parents = [session.get(Job, int(r)) if r.isdigit() else None for r in refs]
        for ref, parent in zip(refs, parents, strict=True):
            if parent is None or not parent.run_dir:
                raise ConfigError(f"{o}: job {ref} has no run folder to use")
        chosen = parents[0] if len(parents) == 1 else _best_parent(session, o, parents)
        out.append(f"{o.split('=', 1)[0]}={chosen.run_dir}")
    return out


def result_score(summary: dict[str, Any]) -> float | None:
    """The one number a stage's summary is judged by: a finetune's main score, a compressed
    model's score (its `compressed` measurement's; top level in rows stored before it was nested)."""
    measured = summary.get("compressed") if isinstance(summary.get("compressed"), dict) else {}
    for value in (summary.get("main_score"), summary.get("score"), measured.get("score")):
        if isinstance(value, int | float):
            return float(value)
    return None


def _best_parent(session: Session, override: str, parents: list[Job]) -> Job:
    """The parent whose latest result scores highest (the first listed on a tie)."""
    scored = []
    for parent in parents:
        summary = session.scalar(
            sa.select(Result.summary).where(Result.job_id == parent.id).order_by(Result.id.desc()).limit(1)
        )
        score = result_score(summary) if isinstance(summary, dict) else None
        if score is None:
            raise ConfigError(f"{override}: job {parent.id} left no score to compare (main_score or score)")
        scored.append((score, parent))
    return max(scored, key=lambda sp: sp[0])[1]


def heartbeat(
    session: Session,
    *,
    worker_id: str,
    job_ids: list[int],
    lease_s: float,
    status: str | None = None,
    progress: dict[int, dict[str, Any]] | None = None,
) -> HeartbeatReply:
    """Renew the leases of this worker's running jobs; say which to kill (cancel requested, or
    no longer this worker's: the lease expired and the job was reaped). `progress`: the jobs'
    progress.json contents that changed since the last heartbeat, stored on the jobs.

    The lease ends `lease_s` after the write lands, by the database's clock: a heartbeat that
    waited on a lock longer than a lease still renews, rather than storing an expired lease."""
    reply = HeartbeatReply()
    if job_ids:
        mine = (Job.id.in_(job_ids), Job.worker_id == worker_id, Job.status == RUNNING)
        if _is_postgres(session):
            # Lock the rows first: an UPDATE that waits on a row lock (FOR UPDATE, say) stores the
            # values it computed before waiting, the clock included. Jobs before the worker's
            # row, the reaper's order: the two never wait on each other.
            session.execute(sa.select(Job.id).where(*mine).order_by(Job.id).with_for_update())
        session.execute(sa.update(Job).where(*mine).values(lease_expires_at=lease_until(session, lease_s)))
        rows = session.execute(
            sa.select(Job.id, Job.worker_id, Job.status, Job.cancel_requested).where(Job.id.in_(job_ids))
        ).all()
        seen = set()
        for job_id, owner, state, cancel in rows:
            seen.add(job_id)
            if owner != worker_id or state != RUNNING:
                reply.lost.add(job_id)
            elif cancel:
                reply.cancel.add(job_id)
        reply.lost |= set(job_ids) - seen
        for job_id, data in (progress or {}).items():
            if job_id in seen and job_id not in reply.lost:
                _store_progress(session, worker_id, job_id, data)
    values: dict[str, Any] = {"last_heartbeat": db_now(session)}
    if status:
        values["status"] = status
    session.execute(sa.update(Worker).where(Worker.id == worker_id).values(**values))
    session.commit()
    return reply


def store_final_progress(session: Session, *, job_id: int, worker_id: str, progress: dict[str, Any]) -> None:
    """The progress a job left when it ended (killed mid-training included): what it reached."""
    _store_progress(session, worker_id, job_id, progress)
    session.commit()


def _store_progress(session: Session, worker_id: str, job_id: int, data: dict[str, Any]) -> None:
    session.execute(sa.update(Job).where(Job.id == job_id, Job.worker_id == worker_id).values(progress=data))


def _owned_attempt(session: Session, job_id: int, attempt_id: int, worker_id: str) -> tuple[Job | None, Attempt | None]:
    query = sa.select(Job).where(Job.id == job_id).execution_options(populate_existing=True)
    if _is_postgres(session):
        query = query.with_for_update()
    job = session.scalar(query)
    attempt = session.get(Attempt, attempt_id, populate_existing=True)
    if job is None or attempt is None:
        return None, None
    latest = session.scalar(sa.select(sa.func.max(Attempt.id)).where(Attempt.job_id == job_id))
    current = job.status == RUNNING and job.worker_id == worker_id and attempt.id == latest
    return (job if current else None), attempt


def finish_attempt(
    session: Session,
    *,
    job_id: int,
    attempt_id: int,
    worker_id: str,
    outcome: str,
    exit_code: int | None = None,
    error: str | None = None,
    summary: StageSummary | dict[str, Any] | None = None,
) -> bool:
    """Close an attempt and its job: succeeded (the summary becomes a `results` row: a model as
    validated where summary.json was read, a dict checked by `new_result`), failed or
    cancelled (queued descendants fail with the reason). False when the job was no longer this
    attempt's (its lease expired and it was reaped): nothing of the job is changed then."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome {outcome!r} not in {OUTCOMES}")
    now = utcnow()
    job, attempt = _owned_attempt(session, job_id, attempt_id, worker_id)
    # False when this attempt was closed already: a retry after a commit whose reply was lost
    # (the database restarted) changes nothing.
    was_running = attempt is not None and attempt.status == RUNNING
    if was_running:
        attempt.status, attempt.exit_code, attempt.finished_at = outcome, exit_code, now
        attempt.error = error[-8000:] if error else None
    if job is None:
        if was_running:
            attempt.status = LOST  # finished after losing its lease: the outcome is not the job's
        session.commit()
        return False
    if job.cancel_requested and outcome != SUCCEEDED:
        outcome = stopped_state(job)
        attempt.status = outcome
    job.status, job.exit_code, job.finished_at = outcome, exit_code, now
    job.lease_expires_at = None
    if outcome == PRUNED:
        error = job.error  # the pruner's reason, set when it asked, says more than "cancelled"
    job.error = error[-8000:] if error else None
    if outcome == CANCELLED and not job.error:
        job.error = "cancelled while running"
    if outcome == SUCCEEDED and summary is not None:
        stage = summary.stage if isinstance(summary, StageSummary) else summary.get("stage")
        row = new_result(summary, job_id=job.id, sweep_id=job.sweep_id, tags=job.tags, kind=str(stage or job.stage))
        job.mlflow_run_id = row.mlflow_run_id
        session.add(row)
    if outcome != SUCCEEDED:
        fail_descendants(session, job)
    session.commit()
    return True


def requeue_job(session: Session, *, job_id: int, attempt_id: int, worker_id: str, reason: str) -> bool:
    """Hand a running job back to the queue (worker shutting down); it reruns with resume=true.
    A job whose cancel was requested ends cancelled instead."""
    now = utcnow()
    job, attempt = _owned_attempt(session, job_id, attempt_id, worker_id)
    if attempt is not None and attempt.status == RUNNING:
        attempt.status, attempt.error, attempt.finished_at = REQUEUED, reason, now
    if job is None:
        session.commit()
        return False
    if job.cancel_requested:
        job.status, job.finished_at = stopped_state(job), now
        job.error = job.error if job.status == PRUNED else "cancelled while running"
        fail_descendants(session, job)
    else:
        _back_to_queue(job)
    session.commit()
    return True


def stopped_state(job: Job) -> str:
    """The state a job whose cancel was requested ends in: pruned when a study's pruner asked."""
    return PRUNED if job.cancel_as == PRUNED else CANCELLED


def _back_to_queue(job: Job) -> None:
    job.status, job.worker_id, job.lease_expires_at, job.resume = QUEUED, None, None, True


def reap_expired_leases(
    session: Session,
    *,
    now: dt.datetime | None = None,
    worker_id: str | None = None,
    live_job_ids: Collection[int] = (),
) -> list[int]:
    """Requeue (resume=true) running jobs whose lease expired, or fail them after max_attempts;
    mark their silent workers lost. Returns the ids handled.

    Expiry is judged by the database's clock (`now` overrides it: tests). `worker_id` and
    `live_job_ids`: the reaping worker and the jobs whose processes it still runs (or whose
    outcome it holds). Those are never reaped, whatever their lease says: a lease of a live owner
    that ran out (a stall longer than the lease) is its heartbeat's to renew."""
    expired = Job.lease_expires_at < (now if now is not None else db_now(session))
    conditions = [Job.status == RUNNING, expired]
    if worker_id is not None and live_job_ids:
        conditions.append(sa.or_(Job.worker_id.is_distinct_from(worker_id), Job.id.not_in(list(live_job_ids))))
    now = now or utcnow()
    query = sa.select(Job).where(*conditions).order_by(Job.id).execution_options(populate_existing=True)
    if _is_postgres(session):
        query = query.with_for_update(skip_locked=True)
    jobs = session.scalars(query).all()
    if not jobs:
        session.rollback()
        return []
    for job in jobs:
        reason = f"lease expired (worker {job.worker_id} stopped heartbeating)"
        session.execute(
            sa.update(Attempt)
            .where(Attempt.job_id == job.id, Attempt.status == RUNNING)
            .values(status=LOST, error=reason, finished_at=now)
        )
        session.execute(
            sa.update(Worker).where(Worker.id == job.worker_id, Worker.status != "stopped").values(status="lost")
        )
        if job.cancel_requested:
            job.status, job.finished_at = stopped_state(job), now
            job.error = job.error if job.status == PRUNED else f"cancelled; {reason}"
            fail_descendants(session, job)
        elif job.attempts >= job.max_attempts:
            job.status, job.finished_at = FAILED, now
            job.error = f"{reason} on attempt {job.attempts} of max_attempts={job.max_attempts}"
            job.lease_expires_at = None
            fail_descendants(session, job)
        else:
            _back_to_queue(job)
    ids = [j.id for j in jobs]
    session.commit()
    return ids

"""The platform database: jobs, their dependencies and attempts, workers, sweeps, pipelines and
results (SQLAlchemy 2.0 typed models; the schema itself is created by the Alembic migrations in
ptmlab/db/migrations, which must be kept in step with this file).

Times are naive UTC (`utcnow()`), the same on SQLite and PostgreSQL. Job ids are integers (what a
person types: `ptmlab logs 42`); sweep and pipeline ids are short hex strings.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from ptmlab.contracts.progress import split_for_listing
from ptmlab.contracts.secrets import redact_tree
from ptmlab.settings import redact, secret_literals

# Job states. A queued job with an unfinished parent simply waits (claim skips it).
QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
# A study trial its pruner stopped (ptmlab.studies): ended on purpose, neither failed nor cancelled by a person.
PRUNED = "pruned"
JOB_STATES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, PRUNED)
TERMINAL_STATES = (SUCCEEDED, FAILED, CANCELLED, PRUNED)

# How an attempt ended: the job's terminal states, or handed back to the queue.
REQUEUED, LOST = "requeued", "lost"  # lost: the lease expired (worker died or hung)
ATTEMPT_STATES = (RUNNING, SUCCEEDED, FAILED, CANCELLED, PRUNED, REQUEUED, LOST)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def short_id() -> str:
    return uuid.uuid4().hex[:12]


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: sa.JSON, list[str]: sa.JSON, list[int]: sa.JSON}


class JobDependency(Base):
    """Edge parent → child: the child is claimable only when every parent succeeded."""

    __tablename__ = "job_dependencies"
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    parent_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True, index=True)


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        # claim: the highest priority queued job of a queue, oldest first.
        sa.Index("ix_jobs_claim", "status", "queue", "priority", "id"),
        # the jobs list filtered by stage or queue, newest first (20,000 jobs)
        sa.Index("ix_jobs_stage_id", "stage", "id"),
        sa.Index("ix_jobs_queue_id", "queue", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str | None] = mapped_column(sa.String(200))  # unique within a pipeline; `job:<name>`
    stage: Mapped[str] = mapped_column(sa.String(100))
    overrides: Mapped[list[str]] = mapped_column(default=list)  # Hydra overrides, without stage/seed
    seed: Mapped[int] = mapped_column(default=42)
    queue: Mapped[str] = mapped_column(sa.String(100), default="default")
    priority: Mapped[int] = mapped_column(default=0)  # higher runs first
    gpus: Mapped[int] = mapped_column(default=0)  # 0: a CPU job, takes one CPU slot; per node when nodes > 1
    # > 1: one job across hosts (Lightning DDP/FSDP under Slurm), claimed only by a worker that
    # launches through `srun` (`ptmlab worker --multinode`), never by a single-host worker.
    nodes: Mapped[int] = mapped_column(default=1, server_default="1")
    # The running stage's progress.json (ptmlab.contracts.progress) as the worker last read it:
    # phase, step/total, latest metrics, ETA, and the metric history the job page draws.
    progress: Mapped[dict[str, Any] | None] = mapped_column()
    timeout_s: Mapped[float | None] = mapped_column()
    max_attempts: Mapped[int] = mapped_column(default=3)
    idempotency_key: Mapped[str | None] = mapped_column(sa.String(200), unique=True)
    tags: Mapped[dict[str, Any]] = mapped_column(default=dict)
    note: Mapped[str | None] = mapped_column(sa.Text)  # free text a researcher keeps with the run
    # Queued through the API (or a study created there): the worker checks it again as the API did.
    submitted_remotely: Mapped[bool] = mapped_column(default=False, server_default=sa.false())

    status: Mapped[str] = mapped_column(sa.String(20), default=QUEUED, index=True)
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    # The state a requested cancel ends in: null = cancelled; "pruned" when a study's pruner asked.
    cancel_as: Mapped[str | None] = mapped_column(sa.String(20))
    resume: Mapped[bool] = mapped_column(default=False)  # requeued: rerun with resume=true
    attempts: Mapped[int] = mapped_column(default=0)  # attempts started (counts against max_attempts)
    worker_id: Mapped[str | None] = mapped_column(sa.String(200))
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column()
    exit_code: Mapped[int | None] = mapped_column()
    error: Mapped[str | None] = mapped_column(sa.Text)
    mlflow_run_id: Mapped[str | None] = mapped_column(sa.String(64))
    run_dir: Mapped[str | None] = mapped_column(sa.Text)

    sweep_id: Mapped[str | None] = mapped_column(sa.ForeignKey("sweeps.id"), index=True)
    pipeline_id: Mapped[str | None] = mapped_column(sa.ForeignKey("pipelines.id"), index=True)
    # A study's trial (ptmlab.studies): the study and Optuna's trial number.
    study_id: Mapped[str | None] = mapped_column(sa.ForeignKey("ptmlab_studies.id"), index=True)
    trial_number: Mapped[int | None] = mapped_column()

    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column()
    finished_at: Mapped[dt.datetime | None] = mapped_column()
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    parents: Mapped[list[Job]] = relationship(
        secondary="job_dependencies",
        primaryjoin="Job.id == JobDependency.job_id",
        secondaryjoin="Job.id == JobDependency.parent_id",
        lazy="selectin",
        viewonly=True,
    )
    attempt_rows: Mapped[list[Attempt]] = relationship(
        back_populates="job", order_by="Attempt.number", lazy="raise_on_sql", viewonly=True
    )

    @property
    def parent_ids(self) -> list[int]:
        return [p.id for p in self.parents]

    def to_dict(self) -> dict[str, Any]:
        """The job as the API, the pages and the CLI show it: secrets in its overrides and error
        masked (the row keeps them: the worker runs them)."""
        return {
            "id": self.id,
            "name": self.name,
            "stage": self.stage,
            "overrides": redact_tree(self.overrides or [], secret_literals()),
            "seed": self.seed,
            "queue": self.queue,
            "priority": self.priority,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "progress": split_for_listing(self.progress)[0],
            "timeout_s": self.timeout_s,
            "max_attempts": self.max_attempts,
            "idempotency_key": self.idempotency_key,
            "tags": dict(self.tags or {}),
            "note": self.note,
            "status": self.status,
            "cancel_requested": self.cancel_requested,
            "resume": self.resume,
            "attempts": self.attempts,
            "worker_id": self.worker_id,
            "exit_code": self.exit_code,
            "error": redact(self.error),
            "mlflow_run_id": self.mlflow_run_id,
            "run_dir": self.run_dir,
            "sweep_id": self.sweep_id,
            "pipeline_id": self.pipeline_id,
            "study_id": self.study_id,
            "trial_number": self.trial_number,
            "depends_on": self.parent_ids,
            "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
            "lease_expires_at": _iso(self.lease_expires_at),
        }


class Attempt(Base):
    """One run of a job on a worker: a row per claim, closed with how it ended."""

    __tablename__ = "attempts"
    __table_args__ = (sa.UniqueConstraint("job_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column()  # 1, 2, ... per job
    worker_id: Mapped[str] = mapped_column(sa.String(200))
    status: Mapped[str] = mapped_column(sa.String(20), default=RUNNING)
    gpu_ids: Mapped[list[int]] = mapped_column(default=list)
    argv: Mapped[list[str]] = mapped_column(default=list)  # overrides as run, `job:` refs resolved
    log_path: Mapped[str | None] = mapped_column(sa.Text)
    exit_code: Mapped[int | None] = mapped_column()
    error: Mapped[str | None] = mapped_column(sa.Text)
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column()

    job: Mapped[Job] = relationship(back_populates="attempt_rows", lazy="raise_on_sql")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "job_id": self.job_id,
            "number": self.number,
            "worker_id": self.worker_id,
            "status": self.status,
            "gpu_ids": list(self.gpu_ids or []),
            "argv": redact_tree(self.argv or [], secret_literals()),
            "log_path": self.log_path,
            "exit_code": self.exit_code,
            "error": redact(self.error),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
        }


class Worker(Base):
    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)  # <host>-<pid>-<random>
    hostname: Mapped[str] = mapped_column(sa.String(200))
    pid: Mapped[int] = mapped_column()
    gpus: Mapped[list[int]] = mapped_column(default=list)
    cpu_slots: Mapped[int] = mapped_column(default=1)
    queues: Mapped[list[str]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(sa.String(20), default="active")  # active|draining|stopped
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_heartbeat: Mapped[dt.datetime] = mapped_column(default=utcnow)
    multinode: Mapped[bool] = mapped_column(default=False, server_default=sa.false())  # launches nodes > 1 jobs
    # Set when the worker runs inside a Slurm allocation (`ptmlab slurm workers`).
    slurm_job_id: Mapped[str | None] = mapped_column(sa.String(50))
    slurm_node: Mapped[str | None] = mapped_column(sa.String(200))  # Slurm's node name (may differ from hostname)
    ends_at: Mapped[dt.datetime | None] = mapped_column()  # the allocation's time limit

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "hostname": self.hostname,
            "pid": self.pid,
            "gpus": list(self.gpus or []),
            "cpu_slots": self.cpu_slots,
            "queues": list(self.queues or []),
            "status": self.status,
            "started_at": _iso(self.started_at),
            "last_heartbeat": _iso(self.last_heartbeat),
            "multinode": self.multinode,
            "slurm_job_id": self.slurm_job_id,
            "slurm_node": self.slurm_node,
            "ends_at": _iso(self.ends_at),
        }


class Sweep(Base):
    __tablename__ = "sweeps"

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True, default=short_id)
    name: Mapped[str | None] = mapped_column(sa.String(200))
    spec: Mapped[dict[str, Any]] = mapped_column(default=dict)  # what was asked (overrides, params)
    job_count: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "spec": redact_tree(dict(self.spec or {}), secret_literals()),
            "job_count": self.job_count,
            "created_at": _iso(self.created_at),
        }


class Pipeline(Base):
    __tablename__ = "pipelines"

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True, default=short_id)
    name: Mapped[str] = mapped_column(sa.String(200))
    spec: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the expanded pipeline config
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "spec": redact_tree(dict(self.spec or {}), secret_literals()),
            "created_at": _iso(self.created_at),
        }


class Study(Base):
    """A hyperparameter study (ptmlab.studies): what was asked and where it stands. Its trials are
    jobs (`jobs.study_id`); Optuna's own record of them (parameters, intermediate and final values)
    is in Optuna's tables of the same database, under `optuna_name`. The table is not called
    `studies`: that name is Optuna's."""

    __tablename__ = "ptmlab_studies"

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True, default=short_id)
    name: Mapped[str | None] = mapped_column(sa.String(200))
    optuna_name: Mapped[str] = mapped_column(sa.String(200), unique=True)
    spec: Mapped[dict[str, Any]] = mapped_column(default=dict)  # ptmlab.studies.spec.StudySpec, as JSON
    status: Mapped[str] = mapped_column(sa.String(20), default="running")  # running|stopped|finished
    stop_reason: Mapped[str | None] = mapped_column(sa.Text)
    submitted_remotely: Mapped[bool] = mapped_column(default=False, server_default=sa.false())  # its trials are too
    # One driver at a time (workers and the API all advance studies): a short lease, not a
    # transaction, because Optuna writes through its own connections meanwhile.
    driver_id: Mapped[str | None] = mapped_column(sa.String(200))
    driver_until: Mapped[dt.datetime | None] = mapped_column()
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)  # reset by resume: the wall-clock budget
    finished_at: Mapped[dt.datetime | None] = mapped_column()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "spec": redact_tree(dict(self.spec or {}), secret_literals()),
            "status": self.status,
            "stop_reason": self.stop_reason,
            "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
        }


class Result(Base):
    """A finished job's summary.json (the contract the leaderboard and dashboard read)."""

    __tablename__ = "results"
    __table_args__ = (
        sa.Index("ix_results_kind_created", "kind", "created_at"),
        # the newest results (overview, results list) and a kind's rows since an id (ptmlab.results `folded`)
        sa.Index("ix_results_created", "created_at", "id"),
        sa.Index("ix_results_kind_id", "kind", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int | None] = mapped_column(sa.ForeignKey("jobs.id", ondelete="SET NULL"), index=True)
    kind: Mapped[str] = mapped_column(sa.String(100))  # = summary["stage"]
    mlflow_run_id: Mapped[str | None] = mapped_column(sa.String(64))
    sweep_id: Mapped[str | None] = mapped_column(sa.String(32), index=True)
    summary: Mapped[dict[str, Any]] = mapped_column(default=dict)
    tags: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "job_id": self.job_id,
            "kind": self.kind,
            "mlflow_run_id": self.mlflow_run_id,
            "sweep_id": self.sweep_id,
            "summary": dict(self.summary or {}),
            "tags": dict(self.tags or {}),
            "created_at": _iso(self.created_at),
        }


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat() + "Z"

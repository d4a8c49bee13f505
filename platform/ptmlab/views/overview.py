"""The front page: job counts per state, result counts per kind, the latest jobs and results."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ptmlab.contracts.secrets import redact_tree
from ptmlab.contracts.summaries import ProbeSummary, measured_on_top, read_stored_summary
from ptmlab.db.models import JOB_STATES, Job, Result, Worker, utcnow
from ptmlab.results import number
from ptmlab.settings import secret_literals
from ptmlab.views.runs import run_label

SKIP = {
    "schema_version",
    "seed",
    "wall_time_s",
    "job_id",
    "trainable_params",
    "total_params",
    "train_time_s",
    "resumed_from_s",
}
PREFERRED = ("main_score", "score", "val_loss", "val_perplexity", "loss", "perplexity", "accuracy")


def headline(summary: dict, limit: int = 4) -> dict[str, float]:
    """The few numbers that say how a run went, whatever its stage: a probe's best layer, else the
    first numbers the row recorded (as stored: any kind's own fields too)."""
    probe = read_stored_summary(summary)
    layers = probe.layers if isinstance(probe, ProbeSummary) else []
    if any(number(e.accuracy) is not None for e in layers):
        best = max(layers, key=lambda e: number(e.accuracy) or float("-inf"))
        return {"best_layer": best.layer, "accuracy": number(best.accuracy)}
    numeric = {
        k: number(v)
        for k, v in measured_on_top(summary).items()
        if k not in SKIP and not isinstance(v, bool) and number(v) is not None
    }
    first = [k for k in PREFERRED if k in numeric]
    rest = [k for k in numeric if k not in first and not k.endswith("_s")]
    return {k: numeric[k] for k in (first + rest)[:limit]}


def overview_view(session: Session, *, limit: int = 15) -> dict[str, Any]:
    job_counts = dict.fromkeys(JOB_STATES, 0)
    job_counts.update({s: n for s, n in session.execute(sa.select(Job.status, sa.func.count()).group_by(Job.status))})
    result_counts = dict(session.execute(sa.select(Result.kind, sa.func.count()).group_by(Result.kind)).all())
    jobs = session.scalars(sa.select(Job).order_by(Job.id.desc()).limit(limit)).all()
    results = session.execute(
        sa.select(Result.id, Result.job_id, Result.kind, Result.mlflow_run_id, Result.summary, Result.created_at)
        .order_by(Result.created_at.desc(), Result.id.desc())
        .limit(limit)
    ).all()
    names = dict(
        session.execute(
            sa.select(Job.id, Job.name).where(Job.id.in_([r.job_id for r in results if r.job_id is not None]))
        )
        .tuples()
        .all()
    )
    workers = session.scalars(
        sa.select(Worker).where(Worker.status != "stopped").order_by(Worker.last_heartbeat.desc()).limit(limit)
    ).all()
    return {
        "job_counts": job_counts,
        "result_counts": result_counts,
        "jobs": [
            {
                "id": j.id,
                "name": j.name,
                "stage": j.stage,
                "status": j.status,
                "overrides": redact_tree(j.overrides or [], secret_literals()),
                "created_at": j.created_at,
                "pipeline_id": j.pipeline_id,
            }
            for j in jobs
        ],
        # a result is named by its job (`run`: `#14`, `name (#14)`), its id is internal
        "results": [
            {
                "id": r.id,
                "job_id": r.job_id,
                "run": run_label(r.id, r.job_id, names.get(r.job_id)),
                "kind": r.kind,
                "mlflow_run_id": r.mlflow_run_id,
                "created_at": r.created_at,
                "headline": headline(r.summary if isinstance(r.summary, dict) else {}),
                "label": " / ".join(
                    str(r.summary.get(k))
                    for k in ("model", "objective", "task", "method", "probe_task")
                    if isinstance(r.summary, dict) and r.summary.get(k)
                ),
            }
            for r in results
        ],
        "workers": [{**w.to_dict(), "slurm": slurm_label(w)} for w in workers],
    }


def slurm_label(worker: Worker, now: dt.datetime | None = None) -> str | None:
    """`job 4711 on gpu-07, 3 h 20 min left` for a worker inside a Slurm allocation; None otherwise."""
    if not worker.slurm_job_id:
        return None
    where = f"job {worker.slurm_job_id}" + (f" on {worker.slurm_node}" if worker.slurm_node else "")
    if worker.ends_at is None:
        return where
    left = max(0, int((worker.ends_at - (now or utcnow())).total_seconds()))
    hours, minutes = divmod(left // 60, 60)
    return f"{where}, {f'{hours} h ' if hours else ''}{minutes} min left"

"""Sweeps and pipelines as lists: each group with its jobs counted by state, how far it has got,
and its best result, for `GET /api/v1/sweeps`, `GET /api/v1/pipelines` and their dashboard pages.

One query counts the jobs of a page of groups by state (GROUP BY, so a 1,000-job sweep costs one
row per state) and one reads the scores of their results; nothing is kept beyond the request."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ptmlab.db.models import (
    CANCELLED,
    FAILED,
    JOB_STATES,
    PRUNED,
    QUEUED,
    RUNNING,
    SUCCEEDED,
    TERMINAL_STATES,
    Job,
    Pipeline,
    Result,
    Sweep,
)
from ptmlab.queue.claim import result_score
from ptmlab.results import rows_by_id

GroupKind = Literal["sweep", "pipeline"]
_MODEL = {"sweep": Sweep, "pipeline": Pipeline}
_COLUMN = {"sweep": Job.sweep_id, "pipeline": Job.pipeline_id}


def group_status(counts: dict[str, int]) -> str:
    """One word for a group: running while any job runs, queued while any waits, then failed if
    any failed, succeeded if any succeeded (a study's pruned trials beside it are its normal end),
    else cancelled or pruned, whichever ended more jobs (empty: queued)."""
    for state in (RUNNING, QUEUED, FAILED, SUCCEEDED):
        if counts.get(state):
            return state
    if counts.get(CANCELLED) or counts.get(PRUNED):
        return CANCELLED if counts.get(CANCELLED, 0) >= counts.get(PRUNED, 0) else PRUNED
    return QUEUED


def list_groups(
    session: Session, kind: GroupKind, *, limit: int = 50, offset: int = 0
) -> tuple[list[dict[str, Any]], int]:
    """Newest first: id, name, created_at, job_count, counts (every job state), finished (jobs in a
    terminal state), status (group_status), best ({score, job_id, result_id} or None), and how
    many groups there are in all."""
    model = _MODEL[kind]
    total = int(session.scalar(sa.select(sa.func.count()).select_from(model)) or 0)
    groups = list(
        session.scalars(
            sa.select(model)
            .order_by(model.created_at.desc(), model.id)
            .limit(max(0, int(limit)))
            .offset(max(0, int(offset)))
        )
    )
    return summarise_groups(session, kind, groups), total


def group_page(session: Session, kind: GroupKind, *, limit: int, offset: int) -> dict[str, Any]:
    """One page of list_groups as /api/v1/sweeps and /api/v1/pipelines return it (GroupPage)."""
    items, total = list_groups(session, kind, limit=limit, offset=offset)
    return {"total": total, "limit": limit, "offset": offset, "items": items}


def summarise_groups(session: Session, kind: GroupKind, groups: list[Sweep] | list[Pipeline]) -> list[dict[str, Any]]:
    """list_groups' entries for the given sweeps or pipelines (e.g. the one a page shows)."""
    column = _COLUMN[kind]
    ids = [g.id for g in groups]
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(JOB_STATES, 0))
    best: dict[str, dict[str, Any]] = {}
    if ids:
        for group_id, state, n in session.execute(
            sa.select(column, Job.status, sa.func.count()).where(column.in_(ids)).group_by(column, Job.status)
        ):
            counts[group_id][state] = int(n)
        scored = session.execute(
            sa.select(column, Result.id).join(Job, Result.job_id == Job.id).where(column.in_(ids)).order_by(Result.id)
        ).all()
        # the summaries through the results store's row cache: each parsed once per process, not per page
        rows = rows_by_id(session, [result_id for _, result_id in scored])
        for group_id, result_id in scored:
            if result_id not in rows:
                continue
            job_id, summary = rows[result_id].job_id, rows[result_id].summary
            score = result_score(summary) if isinstance(summary, dict) else None
            if score is not None and (group_id not in best or score > best[group_id]["score"]):
                best[group_id] = {"score": score, "job_id": job_id, "result_id": result_id}
    out = []
    for g in groups:
        c = dict(counts[g.id])
        out.append(
            {
                "id": g.id,
                "name": g.name,
                "created_at": g.to_dict()["created_at"],
                "job_count": sum(c.values()),
                "counts": c,
                "finished": sum(c[s] for s in TERMINAL_STATES),
                "status": group_status(c),
                "best": best.get(g.id),
            }
        )
    return out


def sweep_jobs(session: Session, sweep_id: str, *, limit: int = 1000) -> tuple[list[str], list[dict[str, Any]]]:
    """The keys the sweep varies (overrides whose value differs between its jobs, seed included),
    and its jobs in submission order: id, name, status, the varied values, and the latest score
    of its results (None before it has one)."""
    jobs = sorted(session.scalars(sa.select(Job).where(Job.sweep_id == sweep_id).limit(limit)), key=lambda j: j.id)
    settings = [
        {"seed": str(j.seed), **dict(o.split("=", 1) for o in j.to_dict()["overrides"] if "=" in o)} for j in jobs
    ]  # as shown: secrets masked
    keys = sorted({k for s in settings for k in s}, key=lambda k: (k != "seed", k))
    varied = [k for k in keys if len({s.get(k) for s in settings}) > 1]
    scores: dict[int, float] = {}
    if jobs:
        rows = session.execute(
            sa.select(Result.job_id, Result.summary).where(Result.job_id.in_([j.id for j in jobs])).order_by(Result.id)
        )
        for job_id, summary in rows:
            score = result_score(summary) if isinstance(summary, dict) else None
            if score is not None:
                scores[job_id] = score
    return varied, [
        {
            "id": j.id,
            "name": j.name,
            "status": j.status,
            "values": [s.get(k, "") for k in varied],
            "score": scores.get(j.id),
        }
        for j, s in zip(jobs, settings, strict=True)
    ]

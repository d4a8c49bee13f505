"""The `results` table: one row per finished job's summary.json (and any summary recorded by
hand), read by the leaderboard and the dashboard instead of MLflow so they stay fast at tens of
thousands of runs.

    record_result(session, summary, *, job_id=None, sweep_id=None, tags=None) -> Result
    query_results(session, *, kind=None, sweep_id=None, job_id=None, tags=None, limit=100,
                  offset=0, newest_first=True) -> (list[Result], total)

`tags` filters are equalities on the row's tags (`{"demo": "true"}`), evaluated in SQL on both
SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ptmlab.db.models import Result, utcnow
from ptmlab.errors import ConfigError

MAX_PAGE = 1000


def new_result(summary: dict[str, Any], *, job_id: int | None = None, sweep_id: str | None = None,
               tags: dict[str, Any] | None = None, kind: str | None = None) -> Result:
    """A Result row for `summary` (not added to a session)."""
    if not isinstance(summary, dict):
        raise ConfigError("a result summary must be a JSON object")
    kind = kind or summary.get("stage")
    if not kind:
        raise ConfigError("summary has no `stage` (the result's kind)")
    return Result(job_id=job_id, kind=str(kind), mlflow_run_id=summary.get("mlflow_run_id"), sweep_id=sweep_id,
                  summary=summary, tags={str(k): v for k, v in (tags or {}).items()}, created_at=utcnow())


def record_result(session: Session, summary: dict[str, Any], *, job_id: int | None = None,
                  sweep_id: str | None = None, tags: dict[str, Any] | None = None) -> Result:
    row = new_result(summary, job_id=job_id, sweep_id=sweep_id, tags=tags)
    session.add(row)
    session.commit()
    return row


def query_results(session: Session, *, kind: str | None = None, sweep_id: str | None = None,
                  job_id: int | None = None, tags: dict[str, Any] | None = None, limit: int = 100,
                  offset: int = 0, newest_first: bool = True) -> tuple[list[Result], int]:
    """Matching rows (a page of at most 1,000) and how many match in all."""
    query = sa.select(Result)
    if kind is not None:
        query = query.where(Result.kind == kind)
    if sweep_id is not None:
        query = query.where(Result.sweep_id == sweep_id)
    if job_id is not None:
        query = query.where(Result.job_id == int(job_id))
    for key, value in (tags or {}).items():
        query = query.where(Result.tags[str(key)].as_string() == str(value))
    total = session.scalar(sa.select(sa.func.count()).select_from(query.subquery())) or 0
    order = (Result.created_at.desc(), Result.id.desc()) if newest_first else (Result.created_at, Result.id)
    limit = max(0, min(int(limit), MAX_PAGE))
    rows = session.scalars(query.order_by(*order).limit(limit).offset(max(0, int(offset)))).all()
    return list(rows), int(total)

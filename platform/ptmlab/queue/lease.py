"""Leases are stamped and judged by the database's clock, never a worker's.

A worker's clock read before a write that waits on a lock (SQLite's `BEGIN IMMEDIATE`, a row
lock on PostgreSQL) is stale by the time the write lands: a lease computed from it can have run
out before it is stored (issue 41, defect 5). Workers on several hosts need not agree on the time
either. So the claim, the heartbeat and the reaper all use the expressions below, which the
database evaluates when the statement runs.

Times are naive UTC on both backends (ptmlab.db.models). SQLAlchemy stores a SQLite datetime as
the text `YYYY-MM-DD HH:MM:SS.ffffff`, and SQLite compares such values as strings, so the clock
is rendered in exactly that form: the leases written here and the datetimes written from Python
(`utcnow()`, tests that pass their own `now`) stay comparable. On PostgreSQL `clock_timestamp()`,
not `now()`: `now()` is when the transaction began, which may be before it waited on a lock.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Session

_SQLITE_FORMAT = "%Y-%m-%d %H:%M:%f"  # %f is SS.SSS: three more digits make SQLAlchemy's microseconds


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


def db_now(session: Session) -> sa.ColumnElement:
    """The database's current time, naive UTC, in the form its datetime columns hold."""
    return _sqlite_time(0.0) if _dialect(session) == "sqlite" else _pg_now()


def lease_until(session: Session, seconds: float) -> sa.ColumnElement:
    """The database's current time plus `seconds`: a lease's end."""
    if _dialect(session) == "sqlite":
        return _sqlite_time(seconds)
    return _pg_now() + sa.literal(dt.timedelta(seconds=seconds), sa.Interval())


def _sqlite_time(offset_s: float) -> sa.ColumnElement:
    modifier = sa.literal(f"{offset_s:+.6f} seconds", sa.String())
    return sa.func.strftime(_SQLITE_FORMAT, "now", modifier, type_=sa.String()).concat("000")


def _pg_now() -> sa.ColumnElement:
    return sa.func.timezone("UTC", sa.func.clock_timestamp(), type_=sa.DateTime())

"""The queue's calls the worker tests make, given the database URL instead of a session, and the
pid a stage=sleep job prints. A plain module, like waiting.py (tests/platform is on sys.path)."""

from __future__ import annotations

from ptmlab import queue
from ptmlab.db import get_sessionmaker


def submit_job(url, **spec) -> int:
    with get_sessionmaker(url)() as s:
        return queue.submit_job(s, **spec).id


def get_job(url, job_id):
    with get_sessionmaker(url)() as s:
        return queue.get_job(s, job_id)


def list_attempts(url, job_id):
    with get_sessionmaker(url)() as s:
        return queue.list_attempts(s, job_id)


def sleep_pid(log_text: str) -> int | None:
    """The pid in a stage=sleep job's `sleep: pid N` line, once it has printed it."""
    for line in log_text.splitlines():
        if line.startswith("sleep: pid "):
            return int(line.split()[2])
    return None

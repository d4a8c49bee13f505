"""A job's newest result of one kind, read the way every job-page view reads it: the row as stored
(fields an older row carries that its contract does not declare are read from there) and its
summary model (`read_stored_summary`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from ptmlab import queue
from ptmlab.contracts.summaries import StageSummary, read_stored_summary
from ptmlab.db.models import Job
from ptmlab.errors import NotFoundError
from ptmlab.results import latest_job_result


@dataclass(frozen=True)
class JobResult:
    job: Job
    result_id: int
    stored: dict[str, Any]
    summary: Any  # the stage's summary model (StageSummary), attributes read as that stage's


def summary_as(stored: Any, kind: str) -> StageSummary | None:
    """A stored summary read as a `kind` result (a bare row carries no `stage`)."""
    return read_stored_summary({**(stored if isinstance(stored, dict) else {}), "stage": kind})


def job_result(session: Session, job_id: int, kind: str) -> JobResult:
    """NotFoundError when the job is unknown or has no `kind` result."""
    job = queue.get_job(session, job_id)
    row = latest_job_result(session, job_id, kind)
    if row is None:
        raise NotFoundError(f"job {job_id} has no {kind} result (stage {job.stage}, {job.status})")
    result_id, stored = row
    return JobResult(job, result_id, stored, summary_as(stored, kind))

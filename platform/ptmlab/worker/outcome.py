"""How a job's attempt ended, stored: requeued, cancelled or pruned, timed out, lease lost, failed
with its exit status and log tail, or succeeded with a summary.json that passes its contract. The
one-line ending the worker appends to the job's log comes from here too."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import sqlalchemy as sa

from ptmlab.contracts import ConfigError, validate_summary
from ptmlab.db import CANCELLED, FAILED, PRUNED, SUCCEEDED, Job
from ptmlab.disk import EXIT_DISK_FULL, describe_disk_full, is_nearly_full
from ptmlab.queue import finish_attempt, requeue_job
from ptmlab.worker.supervision import RunningJob

LOG_TAIL_LINES = 40
LOG_TAIL_CHARS = 4000
SUMMARY_FILE = "summary.json"


def log_tail(path: str | Path, lines: int = LOG_TAIL_LINES, chars: int = LOG_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - chars * 2))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])[-chars:]


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        sig = signal.Signals(-returncode).name if -returncode in signal.Signals._value2member_map_ else str(-returncode)
        hint = " (out of memory? the kernel's OOM killer sends SIGKILL)" if -returncode == signal.SIGKILL else ""
        return f"killed by {sig}{hint}"
    return f"exit code {returncode}"


def store_outcome(s, rj: RunningJob, code: int, ids: dict) -> str:
    """Store the attempt's outcome; the one-line ending for the log."""
    claim = rj.claim
    if rj.kill_reason == "requeue":
        requeue_job(s, **ids, reason="worker shutting down: requeued to resume elsewhere")
        return "requeued: the worker is stopping; it resumes on the next worker"
    if rj.kill_reason == "cancel":
        finish_attempt(s, **ids, outcome=CANCELLED, exit_code=code, error="cancelled while running")
        # A study's pruner asks through the same cancel: the log says which it was.
        return "pruned" if s.scalar(sa.select(Job.status).where(Job.id == claim.job_id)) == PRUNED else "cancelled"
    tail = log_tail(claim.log_path)
    if rj.kill_reason == "timeout":
        error = f"timed out after {claim.timeout_s:g} s (timeout_s); log tail:\n{tail}"
        finish_attempt(s, **ids, outcome=FAILED, exit_code=code, error=error)
        return f"failed: timed out after {claim.timeout_s:g} s"
    if rj.kill_reason == "lost":
        finish_attempt(s, **ids, outcome=FAILED, exit_code=code, error="lease lost; killed")
        return "failed: lease lost; killed"
    if code == 0:
        summary = read_summary(Path(claim.run_dir) / SUMMARY_FILE)
        if summary is None:
            finish_attempt(
                s,
                **ids,
                outcome=FAILED,
                exit_code=code,
                error=f"exited 0 without writing {SUMMARY_FILE} in {claim.run_dir}; log tail:\n{tail}",
            )
            return f"failed: exited 0 without writing {SUMMARY_FILE}"
        try:
            # The one validation of a file another process wrote: the row holds this model's dump
            # (declared fields typed, extra ones of an older stage kept as written).
            typed = validate_summary(summary)
        except ConfigError as exc:
            # Never a silently broken dashboard row: the job fails with the field named.
            finish_attempt(s, **ids, outcome=FAILED, exit_code=code, error=str(exc))
            return f"failed: {exc}"
        finish_attempt(s, **ids, outcome=SUCCEEDED, exit_code=0, summary=typed)
        return "succeeded"
    error = f"{describe_exit(code)}; log tail:\n{tail}"
    # The job's own message is often lost: its log is on the full disk.
    if is_nearly_full(claim.run_dir):
        error = f"disk full: {describe_disk_full(claim.run_dir)}; {error}"
    elif code == EXIT_DISK_FULL:
        error = f"could not write under {claim.run_dir}: no space left, a quota or a file size limit; {error}"
    finish_attempt(s, **ids, outcome=FAILED, exit_code=code, error=error)
    return f"failed: {describe_exit(code)}"


def append_line(path: str | Path, line: str) -> None:
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    except OSError:
        pass  # a full disk: the outcome is in the database


def read_summary(path: Path) -> dict | None:
    try:
        # NaN and ±Infinity (Python's json writes them) are not JSON: PostgreSQL refuses them, and
        # an outcome the database refuses would be retried forever. They are stored as null.
        data = json.loads(path.read_text(), parse_constant=lambda _constant: None)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None

"""A running job as the worker supervises it: its process, when it started, why it is being
killed. A kill signals the job's whole process group (its own session: dataloader workers and
whatever else it started go with it), SIGTERM first, SIGKILL after a grace period."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ptmlab.contracts.progress import PROGRESS_FILE, read_progress
from ptmlab.queue import ClaimedJob
from ptmlab.worker.warm_start import WarmProcess

log = logging.getLogger("ptmlab.worker")


@dataclass
class RunningJob:
    claim: ClaimedJob
    proc: subprocess.Popen | WarmProcess
    started: float
    kill_reason: str | None = None  # cancel | timeout | lost | requeue
    kill_deadline: float | None = None  # when SIGTERM turns into SIGKILL
    progress_mtime: float | None = None  # of the progress.json last sent

    def changed_progress(self) -> dict | None:
        """The job's progress.json when it changed since the last call (else None)."""
        try:
            mtime = (Path(self.claim.run_dir) / PROGRESS_FILE).stat().st_mtime
        except OSError:
            return None
        if mtime == self.progress_mtime:
            return None
        data = read_progress(self.claim.run_dir)
        if data is not None:
            self.progress_mtime = mtime
        return data


def timed_out(running: Iterable[RunningJob], now: float) -> list[RunningJob]:
    """The running jobs past their `timeout_s` that are not being killed yet."""
    return [
        rj for rj in running if rj.claim.timeout_s and rj.kill_reason is None and now - rj.started > rj.claim.timeout_s
    ]


def kill_job(rj: RunningJob, reason: str, kill_grace_s: float, hard: bool = False) -> None:
    """SIGTERM the job's process group (SIGKILL when `hard`), once; `escalate_kills` sends SIGKILL
    when it is still there `kill_grace_s` later."""
    if rj.kill_reason is None:
        rj.kill_reason = reason
        log.info("job %d: killing its process group (%s)", rj.claim.job_id, reason)
    sig = signal.SIGKILL if hard else signal.SIGTERM
    if rj.kill_deadline is None or hard:
        killpg(rj.proc.pid, sig)
        rj.kill_deadline = time.monotonic() + kill_grace_s


def escalate_kills(running: Iterable[RunningJob], now: float) -> None:
    for rj in running:
        if rj.kill_deadline is not None and now >= rj.kill_deadline and rj.proc.poll() is None:
            killpg(rj.proc.pid, signal.SIGKILL)


def killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass

"""Reliability with real processes, on SQLite and on PostgreSQL: two `ptmlab worker` processes
share 50 jobs and run each exactly once; a worker killed with -9 mid-job loses nothing (the job
is requeued when its lease expires and finishes on the other worker, resuming)."""

from __future__ import annotations

import collections
import os
import signal
import time

import pytest
import sqlalchemy as sa
from waiting import wait_until

from ptmlab import queue
from ptmlab.db import LOST, RUNNING, SUCCEEDED, Attempt, Job, Result, get_sessionmaker


def _counts(url) -> collections.Counter:
    with get_sessionmaker(url)() as s:
        return collections.Counter(s.scalars(sa.select(Job.status)).all())


@pytest.mark.slow
def test_two_workers_fifty_jobs_each_runs_exactly_once(db_url, tmp_path, spawn_worker):
    home = tmp_path / "home"
    with get_sessionmaker(db_url)() as s:
        _, jobs = queue.submit_sweep(
            s,
            [{"stage": "sleep", "overrides": ["stage.seconds=0.05"], "seed": i} for i in range(50)],
            name="reliability",
        )
    ids = {j.id for j in jobs}
    # A 10 s lease: nothing here waits for one to expire, and at load 9-12 a worker starved for
    # over 3 s (spawn_worker's lease) had a job reaped and run twice (1 of 2 runs on PostgreSQL).
    workers = [spawn_worker(db_url, home, "--cpu-slots", "2", lease_s=10.0) for _ in range(2)]
    started = time.monotonic()
    wait_until(
        lambda: _counts(db_url)[SUCCEEDED] == 50 or _counts(db_url).keys() - {"queued", "running", SUCCEEDED},
        300,
        "50 jobs to finish",
        interval=0.5,
    )
    print(f"50 jobs on 2 workers: {time.monotonic() - started:.1f} s")
    assert _counts(db_url) == {SUCCEEDED: 50}
    with get_sessionmaker(db_url)() as s:
        attempts = s.execute(sa.select(Attempt.job_id, Attempt.status, Attempt.worker_id)).all()
        results = s.scalars(sa.select(Result.job_id)).all()
    per_job = collections.Counter(a.job_id for a in attempts)
    assert set(per_job) == ids and set(per_job.values()) == {1}, "a job ran more than once"
    assert {a.status for a in attempts} == {SUCCEEDED}
    assert sorted(results) == sorted(ids), "every job has exactly one result row"
    # Each attempt's log was written by one process only (one header line).
    for job_id in ids:
        log = (home / "jobs" / str(job_id) / "logs" / "attempt-1.log").read_text()
        assert log.count("== job ") == 1
    print("jobs per worker:", dict(collections.Counter(a.worker_id for a in attempts)))
    for w in workers:
        w.send_signal(signal.SIGTERM)
    for w in workers:
        assert w.wait(timeout=30) == 0


@pytest.mark.slow
def test_kill_9_worker_mid_job_requeues_and_finishes_elsewhere(db_url, tmp_path, spawn_worker):
    home = tmp_path / "home"
    with get_sessionmaker(db_url)() as s:
        job_id = queue.submit_job(s, stage="sleep", overrides=["stage.seconds=2.5"]).id
    doomed = spawn_worker(db_url, home, "--worker-id", "doomed")

    def child_pid():
        with get_sessionmaker(db_url)() as s:
            lines = queue.read_log(s, job_id).text.splitlines()
        if not any(line.startswith("sleep: 0.50") for line in lines):
            return None  # not far enough yet
        return next(int(line.split()[2]) for line in lines if line.startswith("sleep: pid "))

    pid = wait_until(child_pid, 60, "the job to make progress on the first worker")
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=10)
    killed_at = time.monotonic()
    # The job's process dies with its worker: no orphan runs beside the next attempt.
    wait_until(lambda: not _alive(pid), 5, "the orphaned job process to die")
    assert _counts(db_url) == {RUNNING: 1}  # nobody knows yet: the lease (3 s) has not expired
    survivor = spawn_worker(db_url, home, "--worker-id", "survivor")
    wait_until(lambda: _counts(db_url) == {SUCCEEDED: 1}, 120, "the job to finish on the other worker", interval=0.2)
    print(f"requeued and finished {time.monotonic() - killed_at:.1f} s after kill -9")
    with get_sessionmaker(db_url)() as s:
        attempts = queue.list_attempts(s, job_id)
        results = s.scalars(sa.select(Result).where(Result.job_id == job_id)).all()
        workers = {w.id: w.status for w in queue.list_workers(s)}
    assert [(a.worker_id, a.status) for a in attempts] == [("doomed", LOST), ("survivor", SUCCEEDED)]
    assert "lease expired" in attempts[0].error
    assert len(results) == 1 and results[0].summary["resumed_from_s"] >= 0.5  # resumed, not restarted
    assert workers["doomed"] == "lost"
    survivor.send_signal(signal.SIGTERM)
    assert survivor.wait(timeout=30) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by init) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False

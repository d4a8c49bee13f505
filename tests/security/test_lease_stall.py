"""Issue 41, defect 5: a database stall must not make a worker reap the job it still runs.

A real `ptmlab worker` runs a `stage=sleep` job; while the job sleeps, the database is held longer
than the worker's lease (SQLite: `BEGIN EXCLUSIVE` on the file; PostgreSQL: the job's row locked
`FOR UPDATE` in another transaction). Before the fix, the heartbeat stamped its lease with the
worker's clock read before the blocked write, so the lease it wrote had already run out, and the
same worker's reaper took the job away, killed it and started attempt 2. Leases are now stamped
and judged by the database's clock, and a worker never reaps the jobs it runs.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

import ptmlab.db
from ptmlab import queue
from ptmlab.db import RUNNING, SUCCEEDED, Job, dispose_engines, get_sessionmaker, utcnow

LEASE_S = 2.0
STALL_S = 2.5 * LEASE_S  # longer than a lease: every lease stamped before the stall runs out in it
JOB_S = STALL_S + 4.0  # the job still sleeps when the stall ends
# In-process: no worker process to wait for, so a shorter lease (and stall).
SHORT_LEASE_S = 1.0
SHORT_STALL_S = 2.5 * SHORT_LEASE_S


def _wait(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def _sleeping(db_url: str, job_id: int) -> bool:
    """The job's own process has started sleeping (its log says so)."""
    with get_sessionmaker(db_url)() as s:
        job = s.get(Job, job_id)
        if job is None or job.status != RUNNING:
            return False
        return any(line.startswith("sleep: pid ") for line in queue.read_log(s, job_id).text.splitlines())


@contextmanager
def _stalled(db_url: str, job_id: int) -> Iterator[None]:
    """Hold the database (SQLite) or the job's row (PostgreSQL) until the block ends."""
    url = sa.make_url(db_url)
    if url.get_backend_name() == "sqlite":
        conn = sqlite3.connect(url.database, isolation_level=None, timeout=30)
        try:
            conn.execute("BEGIN EXCLUSIVE")
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()
        return
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn, conn.begin():
            conn.execute(sa.select(Job.id).where(Job.id == job_id).with_for_update())
            yield
    finally:
        engine.dispose()


def test_stall_longer_than_the_lease_leaves_the_job_to_its_worker(db_url, tmp_path, spawn_worker):
    home = tmp_path / "home"
    with get_sessionmaker(db_url)() as s:
        job_id = queue.submit_job(s, stage="sleep", overrides=[f"stage.seconds={JOB_S}"]).id
    worker = spawn_worker(db_url, home, "--burst", lease_s=LEASE_S)
    _wait(lambda: _sleeping(db_url, job_id), 120, "the job to start sleeping")

    with _stalled(db_url, job_id):
        time.sleep(STALL_S)

    assert worker.wait(timeout=120) == 0, Path(worker.log_path).read_text()[-3000:]
    worker_log = Path(worker.log_path).read_text()
    with get_sessionmaker(db_url)() as s:
        job = s.get(Job, job_id)
        attempts = [(a.number, a.status) for a in queue.list_attempts(s, job_id)]
    assert (job.status, attempts) == (SUCCEEDED, [(1, SUCCEEDED)]), worker_log[-3000:]
    assert "reaped" not in worker_log, worker_log[-3000:]


def _claim(db_url: str, tmp_path: Path, worker_id: str = "w", lease_s: float = SHORT_LEASE_S) -> queue.ClaimedJob:
    with get_sessionmaker(db_url)() as s:
        queue.submit_job(s, stage="sleep")
        return queue.claim_next_job(
            s,
            worker_id=worker_id,
            queues=["default"],
            free_gpus=0,
            free_cpu_slots=1,
            lease_s=lease_s,
            jobs_root=tmp_path / "jobs",
        )


def test_a_heartbeat_held_up_longer_than_the_lease_renews_it_from_when_it_lands(db_url, tmp_path):
    """The lease a held-up heartbeat stores ends a lease after the write, by the database's clock:
    any worker's reaper, judging at the moment the stall ended, finds it live."""
    claim = _claim(db_url, tmp_path)
    maker = get_sessionmaker(db_url)

    def beat() -> None:
        with maker() as s:
            queue.heartbeat(s, worker_id="w", job_ids=[claim.job_id], lease_s=SHORT_LEASE_S)

    with _stalled(db_url, claim.job_id):
        beating = threading.Thread(target=beat)
        beating.start()  # waits on the lock
        time.sleep(SHORT_STALL_S)
        released = utcnow()
    beating.join(timeout=60)
    assert not beating.is_alive()
    with maker() as s:
        assert queue.reap_expired_leases(s, now=released) == []
        assert s.get(Job, claim.job_id).lease_expires_at > released


def test_a_worker_never_reaps_its_own_live_jobs_but_still_the_dead_ones_of_others(db_url, tmp_path):
    mine, dead = _claim(db_url, tmp_path, "w"), _claim(db_url, tmp_path, "dead")
    later = utcnow() + dt.timedelta(seconds=10 * SHORT_LEASE_S)  # both leases have run out by then
    with get_sessionmaker(db_url)() as s:
        assert queue.reap_expired_leases(s, now=later, worker_id="w", live_job_ids=[mine.job_id]) == [dead.job_id]
        assert (s.get(Job, mine.job_id).status, s.get(Job, dead.job_id).worker_id) == (RUNNING, None)


def test_heartbeats_failing_longer_than_the_lease_leave_the_job_to_its_worker(tmp_path, ptmlab_home, monkeypatch):
    """The database refuses the heartbeat (SQLite: locked past the busy timeout) for longer than
    the lease; once it answers again, the worker renews its job, and has killed nothing."""
    from ptmlab.worker.agent import WorkerAgent, WorkerOptions
    from ptmlab.worker.supervision import RunningJob

    monkeypatch.setattr(ptmlab.db, "SQLITE_BUSY_TIMEOUT_MS", 200)  # fail fast rather than wait 30 s
    db_url = f"sqlite:///{tmp_path / 'platform.db'}"
    agent = WorkerAgent(
        WorkerOptions(
            database_url=db_url, home=ptmlab_home, worker_id="w", lease_s=SHORT_LEASE_S, poll_s=0.1, warm_start=False
        )
    )
    claim = _claim(db_url, tmp_path)
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)  # the job's process group
    agent.running[claim.job_id] = rj = RunningJob(claim=claim, proc=proc, started=time.monotonic())
    try:
        with _stalled(db_url, claim.job_id):
            deadline = time.monotonic() + SHORT_STALL_S
            while time.monotonic() < deadline:
                agent._guarded(agent._heartbeat_and_reap)
            assert agent.db_error_at is not None  # the heartbeats did fail
            released = utcnow()
        agent._guarded(agent._heartbeat_and_reap)
        assert (rj.kill_reason, proc.poll()) == (None, None)
        with get_sessionmaker(db_url)() as s:
            job = s.get(Job, claim.job_id)
            assert (job.status, job.worker_id) == (RUNNING, "w")
            assert [a.number for a in queue.list_attempts(s, claim.job_id)] == [1]
            assert job.lease_expires_at > released  # renewed: no other worker may take it either
    finally:
        proc.kill()
        proc.wait()
        dispose_engines()

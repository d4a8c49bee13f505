"""Queue semantics in-process on SQLite and PostgreSQL: priorities, GPU fit, dependencies,
cancel/retry, idempotency, leases and the reaper, concurrent claims, pipelines, logs."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import sqlalchemy as sa

from ptmlab import queue
from ptmlab.db import CANCELLED, FAILED, LOST, QUEUED, RUNNING, SUCCEEDED, Attempt, Job, get_sessionmaker, utcnow
from ptmlab.errors import ConfigError, ConflictError, NotFoundError
from ptmlab.results import query_results


@pytest.fixture()
def session(db_url):
    with get_sessionmaker(db_url)() as s:
        yield s


def claim(s, worker="w1", queues=("default",), gpus=(), cpu=1, lease_s=30.0, root="/tmp/ptmlab-test-jobs"):
    return queue.claim_next_job(
        s,
        worker_id=worker,
        queues=list(queues),
        free_gpus=list(gpus),
        free_cpu_slots=cpu,
        lease_s=lease_s,
        jobs_root=root,
    )


def succeed(s, c, worker="w1", summary=None):
    assert queue.finish_attempt(
        s,
        job_id=c.job_id,
        attempt_id=c.attempt_id,
        worker_id=worker,
        outcome=SUCCEEDED,
        exit_code=0,
        summary=summary or {"stage": c.stage, "mlflow_run_id": None},
    )


def fail(s, c, worker="w1", error="boom"):
    assert queue.finish_attempt(
        s, job_id=c.job_id, attempt_id=c.attempt_id, worker_id=worker, outcome=FAILED, exit_code=1, error=error
    )


def test_priority_then_fifo_and_queue_names(session):
    low = queue.submit_job(session, stage="sleep", priority=0)
    high = queue.submit_job(session, stage="sleep", priority=5)
    high2 = queue.submit_job(session, stage="sleep", priority=5)
    other = queue.submit_job(session, stage="sleep", priority=99, queue="other")
    order = [claim(session, cpu=1).job_id for _ in range(3)]
    assert order == [high.id, high2.id, low.id]
    assert claim(session) is None  # `other` is not on this worker's queues
    assert claim(session, queues=("other",)).job_id == other.id


def test_gpu_fit_and_cpu_slots(session):
    big = queue.submit_job(session, stage="sleep", gpus=2, priority=10)
    cpu_job = queue.submit_job(session, stage="sleep", gpus=0, priority=5)
    one = queue.submit_job(session, stage="sleep", gpus=1)
    # One free GPU, no CPU slot: the 2-GPU job does not fit, the CPU job needs a slot.
    c = claim(session, gpus=[3], cpu=0)
    assert (c.job_id, c.gpu_ids) == (one.id, [3])
    assert claim(session, gpus=[], cpu=0) is None
    c = claim(session, gpus=[0, 1], cpu=0)
    assert (c.job_id, c.gpu_ids) == (big.id, [0, 1])
    c = claim(session, gpus=[], cpu=1)
    assert (c.job_id, c.gpu_ids) == (cpu_job.id, [])
    attempt = session.get(Attempt, c.attempt_id)
    assert attempt.worker_id == "w1" and attempt.status == RUNNING


def test_stage_and_seed_move_out_of_overrides(session):
    job = queue.submit_job(session, overrides=["stage=sleep", "seed=7", "stage.seconds=0.2"])
    assert (job.stage, job.seed, job.overrides) == ("sleep", 7, ["stage.seconds=0.2"])
    c = claim(session)
    assert c.run_overrides()[0] == "stage=sleep" and "seed=7" in c.run_overrides()
    assert any(o.startswith("hydra.run.dir=") and o.endswith(f"/{job.id}/run") for o in c.run_overrides())
    with pytest.raises(ConfigError, match="seed"):
        queue.submit_job(session, overrides=["seed=abc"])
    with pytest.raises(ConfigError, match="unknown job field"):
        queue.submit_job(session, stage="sleep", bogus=1)


def test_dependencies_and_failure_propagation(session):
    parent = queue.submit_job(session, stage="sleep", name="parent")
    child = queue.submit_job(session, stage="sleep", depends_on=[parent.id])
    grandchild = queue.submit_job(session, stage="sleep", overrides=[f"backbone=job:{child.id}"])
    assert grandchild.parent_ids == [child.id]
    c = claim(session, cpu=3)
    assert c.job_id == parent.id
    assert claim(session, cpu=3) is None  # children wait for their parent
    fail(session, c, error="CUDA out of memory")
    session.expire_all()
    assert session.get(Job, child.id).status == FAILED
    assert "parent job" in session.get(Job, child.id).error and "CUDA out of memory" in session.get(Job, child.id).error
    assert session.get(Job, grandchild.id).status == FAILED
    assert f"parent job {child.id}" in session.get(Job, grandchild.id).error
    # A new child of a failed parent fails at once.
    late = queue.submit_job(session, stage="sleep", depends_on=[parent.id])
    assert late.status == FAILED
    # Retrying the parent requeues the descendants its failure had failed.
    queue.retry_job(session, parent.id)
    session.expire_all()
    assert [session.get(Job, j).status for j in (parent.id, child.id, grandchild.id, late.id)] == [QUEUED] * 4
    c = claim(session)
    assert c.job_id == parent.id
    succeed(session, c)
    c = claim(session, cpu=3)
    assert c.job_id in (child.id, late.id)
    with pytest.raises(NotFoundError):
        queue.submit_job(session, stage="sleep", depends_on=[999999])


def test_job_reference_resolves_to_parent_run_dir(session):
    pre = queue.submit_job(session, stage="sleep", name="pre")
    fine = queue.submit_job(session, stage="sleep", overrides=["+backbone=job:pre"])
    assert fine.overrides == [f"+backbone=job:{pre.id}"] and fine.parent_ids == [pre.id]
    c = claim(session, root="/data/jobs")
    succeed(session, c)
    c2 = claim(session, root="/data/jobs")
    assert c2.job_id == fine.id and c2.overrides == [f"+backbone=/data/jobs/{pre.id}/run"]


def test_cancel(session):
    queued = queue.submit_job(session, stage="sleep")
    child = queue.submit_job(session, stage="sleep", depends_on=[queued.id])
    assert queue.cancel_job(session, queued.id).status == CANCELLED
    session.expire_all()
    assert session.get(Job, child.id).status == FAILED
    running = queue.submit_job(session, stage="sleep")
    c = claim(session)
    job = queue.cancel_job(session, running.id)
    assert job.status == RUNNING and job.cancel_requested
    reply = queue.heartbeat(session, worker_id="w1", job_ids=[c.job_id], lease_s=30)
    assert reply.cancel == {c.job_id} and not reply.lost
    # The worker killed it: whatever the exit code, it ends cancelled.
    queue.finish_attempt(
        session, job_id=c.job_id, attempt_id=c.attempt_id, worker_id="w1", outcome=FAILED, exit_code=-15
    )
    session.expire_all()
    assert session.get(Job, running.id).status == CANCELLED
    with pytest.raises(ConflictError):
        queue.cancel_job(session, running.id)
    with pytest.raises(NotFoundError):
        queue.cancel_job(session, 424242)


def test_retry_rules(session):
    job = queue.submit_job(session, stage="sleep")
    with pytest.raises(ConflictError, match="queued"):
        queue.retry_job(session, job.id)
    c = claim(session)
    fail(session, c)
    again = queue.retry_job(session, job.id)
    assert (again.status, again.attempts, again.error) == (QUEUED, 0, None)
    c = claim(session)
    assert c.attempt_number == 2 and not c.resume  # a retry starts afresh; attempts keep counting rows


def test_idempotent_submit(session):
    a = queue.submit_job(session, stage="sleep", overrides=["stage.seconds=1"], idempotency_key="k-1")
    b = queue.submit_job(session, stage="sleep", overrides=["stage.seconds=1"], idempotency_key="k-1")
    assert a.id == b.id
    assert session.scalar(sa.select(sa.func.count()).select_from(Job)) == 1
    with pytest.raises(ConflictError, match="k-1"):
        queue.submit_job(session, stage="sleep", overrides=["stage.seconds=2"], idempotency_key="k-1")


def test_idempotent_submit_concurrent(db_url):
    maker = get_sessionmaker(db_url)
    ids, errors = [], []

    def submit():
        try:
            with maker() as s:
                ids.append(queue.submit_job(s, stage="sleep", idempotency_key="same").id)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(ids)) == 1 and len(ids) == 8


def test_lease_expiry_requeues_then_fails_after_max_attempts(session):
    job = queue.submit_job(session, stage="sleep", max_attempts=2)
    c1 = claim(session, worker="dead", lease_s=0.01)
    later = utcnow() + dt.timedelta(seconds=1)
    assert queue.reap_expired_leases(session, now=later) == [job.id]
    session.expire_all()
    j = session.get(Job, job.id)
    assert (j.status, j.resume, j.worker_id) == (QUEUED, True, None)
    assert session.get(Attempt, c1.attempt_id).status == LOST
    # The dead worker wakes up: its result no longer counts, and heartbeats tell it so.
    assert queue.heartbeat(session, worker_id="dead", job_ids=[job.id], lease_s=30).lost == {job.id}
    c2 = claim(session, worker="w2", lease_s=0.01)
    assert c2.resume and c2.attempt_number == 2 and "resume=true" in c2.run_overrides()
    assert not queue.finish_attempt(
        session,
        job_id=c1.job_id,
        attempt_id=c1.attempt_id,
        worker_id="dead",
        outcome=SUCCEEDED,
        exit_code=0,
        summary={"stage": "sleep"},
    )
    assert queue.reap_expired_leases(session, now=utcnow() + dt.timedelta(seconds=1)) == [job.id]
    session.expire_all()
    j = session.get(Job, job.id)
    assert j.status == FAILED and "lease expired" in j.error and "max_attempts=2" in j.error
    assert query_results(session, job_id=job.id)[1] == 0


def test_heartbeat_renews_lease(session):
    queue.submit_job(session, stage="sleep")
    c = claim(session, lease_s=0.5)
    queue.heartbeat(session, worker_id="w1", job_ids=[c.job_id], lease_s=60)
    assert queue.reap_expired_leases(session, now=utcnow() + dt.timedelta(seconds=5)) == []


def test_requeue_on_shutdown(session):
    job = queue.submit_job(session, stage="sleep")
    c = claim(session)
    assert queue.requeue_job(session, job_id=c.job_id, attempt_id=c.attempt_id, worker_id="w1", reason="SIGTERM")
    session.expire_all()
    assert session.get(Job, job.id).status == QUEUED and session.get(Job, job.id).resume


def test_success_records_result(session):
    sweep, jobs = queue.submit_sweep(
        session, [{"stage": "sleep", "seed": s, "tags": {"grp": "a"}} for s in (1, 2)], name="seeds"
    )
    assert sweep.job_count == 2 and all(j.sweep_id == sweep.id for j in jobs)
    c = claim(session)
    succeed(session, c, summary={"stage": "sleep", "mlflow_run_id": "abc123", "seconds": 0.1})
    session.expire_all()
    assert session.get(Job, c.job_id).mlflow_run_id == "abc123"
    rows, total = query_results(session, kind="sleep", sweep_id=sweep.id, tags={"grp": "a"})
    assert total == 1 and rows[0].summary["seconds"] == 0.1 and rows[0].job_id == c.job_id
    assert query_results(session, tags={"grp": "b"})[1] == 0


def test_concurrent_claims_never_share_a_job(db_url):
    maker = get_sessionmaker(db_url)
    with maker() as s:
        queue.submit_sweep(s, [{"stage": "sleep"} for _ in range(60)])
    claimed: list[int] = []
    lock = threading.Lock()

    def worker(name):
        with maker() as s:
            while (c := claim(s, worker=name, cpu=1)) is not None:
                with lock:
                    claimed.append(c.job_id)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == 60
    with maker() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(Attempt)) == 60


def test_list_jobs_filters_and_pagination(session):
    for i in range(5):
        queue.submit_job(session, stage="sleep", queue="a" if i % 2 else "b")
    rows, total = queue.list_jobs(session, queue="a", limit=1)
    assert total == 2 and len(rows) == 1
    rows, total = queue.list_jobs(session, limit=2, offset=2)
    assert total == 5 and [r.id for r in rows] == sorted([r.id for r in rows], reverse=True)
    assert queue.list_jobs(session, status="running")[1] == 0


def test_read_log_offset_and_tail(session, tmp_path):
    job = queue.submit_job(session, stage="sleep")
    c = claim(session, root=tmp_path)
    from pathlib import Path

    Path(c.log_path).parent.mkdir(parents=True)
    Path(c.log_path).write_text("".join(f"line {i}\n" for i in range(100)))
    assert queue.read_log(session, job.id, tail=2).text == "line 98\nline 99\n"
    first = queue.read_log(session, job.id, offset=0)
    assert first.text.startswith("line 0\n") and first.offset == first.size
    assert queue.read_log(session, job.id, offset=first.offset).text == ""

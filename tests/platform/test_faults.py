"""Dependencies fail; runs survive. Real servers and real `ptmlab worker` processes:

(a) the MLflow server is killed in the middle of a job and comes back 30 s later: the job goes on
    training (metrics queued), then ends with every metric and artifact in MLflow;
(b) PostgreSQL restarts in the middle of a sweep (`pg_ctl restart`, then a longer stop while jobs
    finish): workers and the API reconnect, no job is lost or run twice;
(c) the disk of PTMLAB_HOME fills up during a run (a 24 MiB tmpfs; where mount(8) is not
    permitted, RLIMIT_FSIZE on the worker instead): the job fails naming the path, a worker on the
    full disk claims nothing and stays up, earlier runs' files are intact;
(d) a queued job whose run folder was deleted recreates it and succeeds.

Each test ends by asserting the state of every job it made (status, attempts, results).
"""

from __future__ import annotations

import collections
import hashlib
import json
import random
import resource
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from api_server import LiveApi
from pg import start_postgres
from waiting import wait_until

from ptmlab import queue
from ptmlab.db import FAILED, QUEUED, REQUEUED, SUCCEEDED, Attempt, Job, Result, dispose_engines, get_sessionmaker

WORDS = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox jumps".split()
MLFLOW_OUTAGE_S = 30


@pytest.fixture()
def corpus(tmp_path) -> Path:
    rng = random.Random(0)
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "doc.txt").write_text(
        "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) for _ in range(400)) + "\n"
    )
    return folder


@pytest.fixture()
def sqlite_url(tmp_path):
    yield f"sqlite:///{tmp_path / 'platform.db'}"
    dispose_engines()


def pretrain(corpus: Path, steps: int, every: int) -> list[str]:
    """A tiny real pretrain job: BERT-tiny MLM on `corpus`, a metric per step."""
    return [
        "model=bert_tiny",
        "objective=mlm",
        "data=text_files",
        f"data.corpus.path={corpus}",
        "data.block_size=32",
        "data.batch_size=16",
        "tokenizer.vocab_size=90",
        "tokenizer.min_frequency=1",
        f"trainer.max_steps={steps}",
        f"trainer.val_check_interval={every}",
        "trainer.limit_val_batches=1",
        "trainer.log_every_n_steps=1",
        "trainer.enable_progress_bar=false",
        f"checkpoint_every_n_steps={every}",
    ]


def submit(url: str, **spec) -> int:
    with get_sessionmaker(url)() as s:
        return queue.submit_job(s, **spec).id


def job_states(url: str) -> dict[int, tuple[str, int, list[str], int]]:
    """Every job: (status, attempts counted on the job, its attempt rows' statuses, result rows)."""
    with get_sessionmaker(url)() as s:
        jobs = s.execute(sa.select(Job.id, Job.status, Job.attempts)).all()
        attempts = collections.defaultdict(list)
        for job_id, status in s.execute(sa.select(Attempt.job_id, Attempt.status).order_by(Attempt.id)):
            attempts[job_id].append(status)
        results = collections.Counter(s.scalars(sa.select(Result.job_id)).all())
    return {j.id: (j.status, j.attempts, attempts[j.id], results[j.id]) for j in jobs}


def get_job(url: str, job_id: int) -> Job:
    with get_sessionmaker(url)() as s:
        return queue.get_job(s, job_id)


def worker_log(worker) -> str:
    return Path(worker.log_path).read_text()


def file_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# -- (a) MLflow ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_mlflow_server_down_mid_job_every_metric_and_artifact_arrives(
    mlflow_server, spawn_worker, sqlite_url, corpus, tmp_path, monkeypatch
):
    from mlflow.tracking import MlflowClient

    home, steps, every = tmp_path / "home", 30, 10
    job_id = submit(sqlite_url, stage="pretrain", overrides=pretrain(corpus, steps, every))
    mlflow_server.wait_ready()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
    worker = spawn_worker(sqlite_url, home, "--burst")
    client = MlflowClient(tracking_uri=mlflow_server.url)
    run_id_file = home / "jobs" / str(job_id) / "run" / "mlflow_run_id.txt"

    def logging_metrics() -> str | None:
        if worker.poll() is not None:
            pytest.fail(f"the worker exited early: {worker_log(worker)[-3000:]}")
        run_id = run_id_file.read_text().strip() if run_id_file.exists() else ""
        return run_id if run_id and client.get_metric_history(run_id, "train/loss") else None

    run_id = wait_until(logging_metrics, 300, "the job to log its first metrics to MLflow", interval=0.2)
    mlflow_server.kill()
    down_ms = time.time() * 1000
    time.sleep(MLFLOW_OUTAGE_S)
    up_ms = time.time() * 1000
    mlflow_server.start()
    mlflow_server.wait_ready()
    assert worker.wait(timeout=600) == 0, worker_log(worker)[-3000:]

    # The job: succeeded at its first attempt, its result recorded.
    assert job_states(sqlite_url) == {job_id: (SUCCEEDED, 1, [SUCCEEDED], 1)}
    job = get_job(sqlite_url, job_id)
    assert job.mlflow_run_id == run_id
    # MLflow: the run finished, every step's metric is there, and training went on while the
    # server was away (metrics measured then were queued, not waited for).
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    losses = client.get_metric_history(run_id, "train/loss")
    assert sorted({m.step for m in losses}) == list(range(steps))
    assert len(client.get_metric_history(run_id, "val/loss")) == steps // every
    # (A logger that waits for MLflow measures at most one step while it is away.)
    measured_before = sum(m.timestamp < down_ms for m in losses)
    measured_while_down = [m.step for m in losses if down_ms <= m.timestamp < up_ms]
    assert len(measured_while_down) >= min(2, steps - measured_before), (
        down_ms,
        up_ms,
        [(m.step, m.timestamp) for m in losses],
    )
    # Every artifact: each exported file, the config, the provenance and the summary.
    run_dir = Path(job.run_dir)

    def artifacts(path: str | None = None) -> set[str]:
        out = set()
        for a in client.list_artifacts(run_id, path):
            out |= artifacts(a.path) if a.is_dir else {a.path}
        return out

    exported = {f"export/{p.relative_to(run_dir / 'export')}" for p in (run_dir / "export").rglob("*") if p.is_file()}
    assert exported and artifacts() >= exported | {
        "config.yaml",
        "summary.json",
        "provenance/packages.json",
        "provenance/data_hashes.json",
    }
    stored_summary = Path(client.download_artifacts(run_id, "summary.json", str(tmp_path)))
    assert stored_summary.read_bytes() == (run_dir / "summary.json").read_bytes()


# -- (b) PostgreSQL -------------------------------------------------------------------------------
@pytest.fixture()
def own_postgres():
    """A PostgreSQL server of this test's own: it is restarted, which the session's must not be."""
    from pg import find_pg_bin

    if find_pg_bin() is None:
        pytest.fail("PostgreSQL server binaries missing (make test installs them: scripts/install_system_deps.sh)")
    server = start_postgres()
    yield server
    dispose_engines()
    server.stop()


@pytest.mark.slow
def test_postgres_restarts_mid_sweep_no_job_lost_or_run_twice(own_postgres, spawn_worker, tmp_path):
    db_url = own_postgres.create_database()
    home, lease_s = tmp_path / "home", 3.0
    api = LiveApi(db_url, home, tmp_path, token="t0ken")
    api.start()
    auth = {"Authorization": "Bearer t0ken"}
    try:
        r = httpx.post(
            f"{api.base}/api/v1/sweeps",
            headers=auth,
            timeout=120,
            json={"overrides": ["stage=sleep", "stage.seconds=1", "seed=range(0,16)"], "name": "faults"},
        )
        assert r.status_code == 201, r.text
        ids = set(r.json()["job_ids"])
        assert len(ids) == 16
        workers = [spawn_worker(db_url, home, "--cpu-slots", "2", lease_s=lease_s) for _ in range(2)]

        def succeeded() -> int:
            return sum(state[0] == SUCCEEDED for state in job_states(db_url).values())

        wait_until(lambda: succeeded() >= 3, 300, "3 jobs of the sweep to succeed", interval=0.3)
        own_postgres.restart()  # `pg_ctl restart -m fast`: every connection is cut
        wait_until(lambda: succeeded() >= 6, 300, "the sweep to go on after the restart", interval=0.3)

        # A longer outage, while jobs finish: their outcomes wait in the workers, and every lease
        # runs out before the server is back. The server stops just after a job starts, so that job
        # is still running: sleep jobs started together also end together, and stopping after the
        # sixth success once found every job of that round already done and none to finish.
        def a_job_just_started() -> bool:
            now = time.time()
            return any(
                now - job.stat().st_mtime < 1.0 and not (job / "run" / "summary.json").exists()
                for job in (home / "jobs").iterdir()
            )

        wait_until(a_job_just_started, 120, "a job to start before the database stops", interval=0.05)
        own_postgres.stop_server()
        stopped = time.time()

        def finished_while_down() -> bool:
            return any(p.stat().st_mtime > stopped for p in (home / "jobs").glob("*/run/summary.json"))

        wait_until(finished_while_down, 120, "a job to finish while the database is down", interval=0.2)
        time.sleep(max(0.0, stopped + lease_s + 1 - time.time()))
        own_postgres.start_server()

        # The API reconnects: it answers, and takes a new job.
        wait_until(
            lambda: httpx.get(f"{api.base}/healthz", timeout=10).status_code == 200,
            60,
            "the API's /healthz after the restart",
            interval=0.5,
        )
        r = httpx.post(
            f"{api.base}/api/v1/jobs",
            headers=auth,
            timeout=60,
            json={"stage": "sleep", "overrides": ["stage.seconds=0.5"], "seed": 99},
        )
        assert r.status_code == 201, r.text
        ids.add(r.json()["id"])
        wait_until(
            lambda: succeeded() == len(ids) or set(job_states(db_url)) - ids, 300, "every job to succeed", interval=0.5
        )

        # Every job ran exactly once: one attempt, succeeded, one result row.
        assert job_states(db_url) == {i: (SUCCEEDED, 1, [SUCCEEDED], 1) for i in ids}
        listed = httpx.get(f"{api.base}/api/v1/jobs", params={"limit": 100}, timeout=30).json()
        assert {j["id"]: j["status"] for j in listed["jobs"]} == {i: SUCCEEDED for i in ids}
        # Both workers lived through it (and saw the outage), and stop cleanly.
        for w in workers:
            assert w.poll() is None, worker_log(w)[-3000:]
        assert all("database error (will retry)" in worker_log(w) for w in workers)
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            assert w.wait(timeout=60) == 0, worker_log(w)[-3000:]
    finally:
        api.kill()


# -- (c) disk full --------------------------------------------------------------------------------
@dataclass
class SmallDisk:
    path: Path
    # True: a tmpfs of `size` bytes is mounted at `path`. False: mount(8) is not permitted here,
    # so files over `size` bytes fail instead (RLIMIT_FSIZE on the worker: EFBIG, the same error
    # path in the job as ENOSPC).
    tmpfs: bool
    size: int


@pytest.fixture()
def small_disk(tmp_path):
    path, size = tmp_path / "disk", 24 << 20
    path.mkdir()
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)], capture_output=True, text=True
        ).returncode
        == 0
    )
    yield SmallDisk(path, tmpfs=mounted, size=size if mounted else 4 << 20)
    if mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path, leave: int) -> None:
    """Write a file under `path` until `leave` bytes are free on its filesystem (0: until full)."""
    with open(path / f"filler-{time.monotonic_ns()}", "wb") as f:
        try:
            while (free := shutil.disk_usage(path).free) > leave:
                f.write(b"\0" * min(1 << 20, free - leave))
                f.flush()
        except OSError:  # full
            pass


@pytest.mark.slow
def test_disk_fills_up_mid_run_job_fails_naming_the_path(
    small_disk, spawn_worker, sqlite_url, corpus, tmp_path, monkeypatch
):
    home = small_disk.path
    # The platform database and MLflow's store live elsewhere; run folders, logs, caches and
    # MLflow's artifacts are on the small disk.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    first = submit(sqlite_url, stage="pretrain", overrides=pretrain(corpus, 10, 10))
    worker = spawn_worker(sqlite_url, home, "--burst")
    assert worker.wait(timeout=600) == 0, worker_log(worker)[-3000:]
    assert job_states(sqlite_url) == {first: (SUCCEEDED, 1, [SUCCEEDED], 1)}
    before = file_hashes(home)
    assert any(name.endswith("last.ckpt") for name in before)

    # The second run needs more than is left: a checkpoint alone is ~6 MB.
    second = submit(sqlite_url, stage="pretrain", overrides=pretrain(corpus, 10, 10))
    if small_disk.tmpfs:
        fill(home, leave=3 << 20)
        worker = spawn_worker(sqlite_url, home, "--burst")
    else:
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (small_disk.size, hard))
        try:  # inherited by the worker and its jobs only
            worker = spawn_worker(sqlite_url, home, "--burst")
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert worker.wait(timeout=600) == 0, worker_log(worker)[-3000:]
    job = get_job(sqlite_url, second)
    assert (job.status, job.exit_code) == (FAILED, 28), job.error
    headline = job.error.splitlines()[0]
    print("the failed job's error:", headline)
    assert job.run_dir in headline, headline  # the path, on the first line
    assert ("No space left on device" in headline) if small_disk.tmpfs else ("file size limit" in headline)

    # A worker on a full disk claims nothing (it could not write a log) and stays up; the job waits.
    third = submit(sqlite_url, stage="sleep", overrides=["stage.seconds=0.2"])
    if small_disk.tmpfs:
        fill(home, leave=0)
        worker = spawn_worker(sqlite_url, home, "--burst")
        assert worker.wait(timeout=120) == 0, worker_log(worker)[-3000:]
        assert "not claiming jobs" in worker_log(worker)
        assert job_states(sqlite_url)[third] == (QUEUED, 0, [], 0)
        for filler in home.glob("filler-*"):
            filler.unlink()
    worker = spawn_worker(sqlite_url, home, "--burst")
    assert worker.wait(timeout=120) == 0, worker_log(worker)[-3000:]

    assert job_states(sqlite_url) == {
        first: (SUCCEEDED, 1, [SUCCEEDED], 1),
        second: (FAILED, 1, [FAILED], 0),
        third: (SUCCEEDED, 1, [SUCCEEDED], 1),
    }
    after = file_hashes(home)
    assert {name: after.get(name) for name in before if not name.startswith("filler-")} == {
        name: digest for name, digest in before.items() if not name.startswith("filler-")
    }


# -- (d) a deleted run folder ---------------------------------------------------------------------
def test_run_folder_deleted_while_queued_is_recreated(sqlite_url, spawn_worker, tmp_path):
    home = tmp_path / "home"
    job_id = submit(sqlite_url, stage="sleep", overrides=["stage.seconds=3"])
    first = spawn_worker(sqlite_url, home)
    run_dir = home / "jobs" / str(job_id) / "run"
    progress = run_dir / "sleep_progress.json"

    def slept() -> float:
        try:
            return json.loads(progress.read_text())["slept_s"]
        except (OSError, ValueError):
            return 0.0

    wait_until(lambda: slept() >= 0.5, 60, "the job to make progress")
    first.send_signal(signal.SIGTERM)  # requeued, to resume from its progress file
    assert first.wait(timeout=30) == 0
    assert job_states(sqlite_url) == {job_id: (QUEUED, 1, [REQUEUED], 0)}
    shutil.rmtree(home / "jobs")  # the run folder, its progress and its logs

    second = spawn_worker(sqlite_url, home, "--burst")
    assert second.wait(timeout=60) == 0, worker_log(second)[-3000:]
    assert job_states(sqlite_url) == {job_id: (SUCCEEDED, 2, [REQUEUED, SUCCEEDED], 1)}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["resumed_from_s"] == 0.0  # nothing left to resume from: it started over
    with get_sessionmaker(sqlite_url)() as s:
        assert "sleep: 3.00/3.00 s" in queue.read_log(s, job_id).text

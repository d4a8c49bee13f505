"""A real `stage=pretrain` job (tiny BERT, 30 steps) through a worker: MLflow run id on the job
and in `results`; and `ptmlab up`: worker + MLflow UI on 127.0.0.1, Ctrl-C or SIGTERM stops all (grandchildren
included)."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest
from pg import free_port
from waiting import wait_until

from ptmlab import queue
from ptmlab.db import SUCCEEDED, dispose_engines, get_sessionmaker
from ptmlab.results import query_results

WORDS = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox jumps".split()


@pytest.mark.slow
def test_pretrain_job_through_a_worker(tmp_path, spawn_worker, monkeypatch):
    rng = random.Random(0)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "doc.txt").write_text(
        "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) for _ in range(400)) + "\n"
    )
    url = f"sqlite:///{tmp_path / 'platform.db'}"
    home = tmp_path / "home"
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    overrides = [
        "model=bert_tiny",
        "objective=mlm",
        "data=text_files",
        f"data.corpus.path={corpus}",
        "data.block_size=32",
        "data.batch_size=16",
        "tokenizer.vocab_size=90",
        "tokenizer.min_frequency=1",
        "trainer.max_steps=30",
        "trainer.val_check_interval=10",
        "trainer.limit_val_batches=2",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=10",
    ]
    with get_sessionmaker(url)() as s:
        job_id = queue.submit_job(s, stage="pretrain", overrides=overrides, tags={"suite": "worker"}).id
    worker = spawn_worker(url, home, "--burst")
    assert worker.wait(timeout=600) == 0
    with get_sessionmaker(url)() as s:
        job = queue.get_job(s, job_id)
        assert job.status == SUCCEEDED, job.error
        (result,), _ = query_results(s, kind="pretrain", job_id=job_id)
    assert result.summary["steps"] == 30 and result.mlflow_run_id == job.mlflow_run_id
    assert result.tags == {"suite": "worker"}
    from mlflow.tracking import MlflowClient

    run = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}").get_run(job.mlflow_run_id)
    assert run.data.tags["ptmlab.job_id"] == str(job_id) and run.info.status == "FINISHED"
    assert (home / "jobs" / str(job_id) / "run" / "checkpoints" / "last.ckpt").exists()
    dispose_engines()


@pytest.mark.slow
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_up_starts_worker_and_mlflow_ui_and_a_signal_stops_all(tmp_path, stop_signal):
    home = tmp_path / "home"
    port = free_port()
    env = {
        **os.environ,
        "PTMLAB_HOME": str(home),
        "PTMLAB_MLFLOW_UI_PORT": str(port),
        "PTMLAB_BIND_PORT": str(free_port()),
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("PTMLAB_DATABASE_URL", None)
    # --cold-start: the one job here is a sleep, and a warm worker's launcher would spend ~10 CPU-s
    # importing torch, Lightning and the stages for it (test_warm_start.py covers the warm path).
    up = subprocess.Popen(
        [sys.executable, "-m", "ptmlab.cli", "up", "--cold-start"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    groups: list[int] = []
    try:

        def mlflow_answers():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(mlflow_answers, 120, "the MLflow UI to answer", interval=0.5)
        url = f"sqlite:///{home / 'ptmlab.db'}"
        with get_sessionmaker(url)() as s:
            job_id = queue.submit_job(s, stage="sleep").id
        wait_until(lambda: _status(url, job_id) == SUCCEEDED, 60, "the embedded worker to run a job")
        groups = _children(up.pid)  # each child leads its own process group
        assert len(groups) >= 2
        # The flag reaches the worker: started cold, it runs no launcher.
        assert any(_cmdline(pid)[-1:] == ["--cold-start"] and "worker" in _cmdline(pid) for pid in groups)
        # The MLflow UI's group holds its uvicorn workers and job consumers: they must go too.
        assert len(_group_members(groups)) > len(groups)
        os.killpg(up.pid, stop_signal)  # Ctrl-C in the terminal signals the foreground group
        out, _ = up.communicate(timeout=60)
    finally:
        for pgid in [up.pid, *groups]:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    # One line per service with where to find it.
    assert re.search(r"^dashboard \+ API  http://127\.0\.0\.1:\d+  \(pid \d+\)$", out, re.M), out
    assert re.search(rf"^MLflow UI        http://127\.0\.0\.1:{port}  \(pid \d+\)$", out, re.M), out
    assert re.search(r"^worker           queues default, 1 CPU slot\(s\), GPUs none  \(pid \d+\)$", out, re.M), out
    assert f"database         sqlite:///{home}" in out
    time.sleep(0.5)
    assert not _group_members(groups), out[-2000:]
    dispose_engines()


def _status(url, job_id):
    with get_sessionmaker(url)() as s:
        return queue.get_job(s, job_id).status


def _cmdline(pid: int) -> list[str]:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\0")[:-1]
    except OSError:
        return []


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _group_members(pgids: list[int]) -> list[int]:
    """Live (not zombie) processes whose process group is one of `pgids`."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,pgid=,stat="], capture_output=True, text=True).stdout
    return [
        int(pid)
        for pid, pgid, stat in (line.split()[:3] for line in out.splitlines())
        if int(pgid) in pgids and not stat.startswith("Z")
    ]

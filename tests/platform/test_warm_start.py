"""Warm job start (ptmlab/worker/warm_start.py): jobs forked from a launcher that has the heavy
modules imported behave as `python -m ptmlab.run` jobs do — own process group and session, the
job's environment, output in the attempt's log, Popen's exit statuses (a kill is -signal), death
with the launcher — and through a real worker the fault paths hold on the warm path: cancel,
timeout, SIGTERM requeue with resume, SIGKILL of the worker. The cold path is the rest of the
suite's (its workers start with `--cold-start`: spawn_worker in conftest.py)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from queue_by_url import get_job, sleep_pid, submit_job
from waiting import wait_until

from ptmlab import queue
from ptmlab.db import CANCELLED, FAILED, QUEUED, RUNNING, SUCCEEDED, get_sessionmaker
from ptmlab.results import query_results
from ptmlab.worker.warm_start import WarmLauncher

pytestmark = pytest.mark.timeout(600)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for the launcher to reap it is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _sleep_pid(log: Path) -> int | None:
    return sleep_pid(log.read_text(errors="replace")) if log.exists() else None


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    home = tmp_path_factory.mktemp("warm_home")
    env = {**os.environ, "PTMLAB_HOME": str(home), "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"}
    warm = WarmLauncher(env=env)
    wait_until(lambda: warm.ready or warm.proc.poll() is not None, 180, "the launcher's imports")
    assert warm.ready, warm.why_not()
    yield warm, env, home
    warm.close()


def test_a_forked_job_runs_logs_and_exits_like_a_cold_one(launcher, tmp_path):
    warm, env, _ = launcher
    log = tmp_path / "ok.log"
    job = warm.launch(
        ["stage=sleep", "stage.seconds=0.3", f"hydra.run.dir={tmp_path / 'ok'}"], {**env, "PTMLAB_JOB_ID": "77"}, log
    )
    assert job is not None and job.wait(120) == 0
    text = log.read_text()
    assert "sleep: pid" in text
    summary = json.loads((tmp_path / "ok" / "summary.json").read_text())
    assert summary["job_id"] == "77"  # the job's environment, not the launcher's
    failing = warm.launch(
        ["stage=sleep", "stage.fail=true", f"hydra.run.dir={tmp_path / 'bad'}"], env, tmp_path / "bad.log"
    )
    assert failing.wait(120) == 1
    assert "fails on purpose" in (tmp_path / "bad.log").read_text()
    refused = warm.launch(["stage=sleep", "stage.nope=1"], env, tmp_path / "refused.log")
    assert refused.wait(120) == 2  # the one-line config error, as `python -m ptmlab.run` exits
    assert (tmp_path / "refused.log").read_text().count("error[config_error]") == 1


def test_a_forked_job_has_its_own_group_and_dies_by_signal_or_with_the_launcher(launcher, tmp_path):
    warm, env, _ = launcher
    log = tmp_path / "long.log"
    job = warm.launch(["stage=sleep", "stage.seconds=120", f"hydra.run.dir={tmp_path / 'long'}"], env, log)
    wait_until(lambda: _sleep_pid(log) is not None, 60, "the job to start sleeping")
    assert _sleep_pid(log) == job.pid
    assert os.getpgid(job.pid) == job.pid and os.getsid(job.pid) == job.pid  # its own session and group
    os.killpg(job.pid, signal.SIGKILL)
    assert job.wait(30) == -signal.SIGKILL  # Popen's convention: killed by that signal

    other = WarmLauncher(env=env)
    wait_until(lambda: other.ready or other.proc.poll() is not None, 180, "a second launcher's imports")
    orphan_log = tmp_path / "orphan.log"
    orphan = other.launch(["stage=sleep", "stage.seconds=120", f"hydra.run.dir={tmp_path / 'orphan'}"], env, orphan_log)
    wait_until(lambda: _sleep_pid(orphan_log) is not None, 60, "the second job to start")
    other.proc.kill()  # the launcher dies (as it does with its worker): its jobs die too
    wait_until(lambda: not _alive(orphan.pid), 30, "the orphaned job to die")
    assert orphan.wait(30) == -signal.SIGKILL


def _log(home: Path, job_id: int) -> Path:
    return home / "jobs" / str(job_id) / "logs" / "attempt-1.log"


def test_cancel_timeout_sigterm_and_worker_kill_on_the_warm_path(tmp_path, spawn_worker):
    url = f"sqlite:///{tmp_path / 'platform.db'}"
    home = tmp_path / "home"
    worker = spawn_worker(url, home, warm=True)
    wait_until(lambda: "warm launcher ready" in Path(worker.log_path).read_text(), 180, "the worker's warm launcher")

    done = submit_job(url, stage="sleep", overrides=["stage.seconds=0.2"])
    wait_until(lambda: get_job(url, done).status == SUCCEEDED, 120, "a warm job to succeed")
    assert "== warm start" in _log(home, done).read_text()

    cancelled = submit_job(url, stage="sleep", overrides=["stage.seconds=120"])
    wait_until(lambda: _sleep_pid(_log(home, cancelled)) is not None, 60, "the job to run")
    pid = _sleep_pid(_log(home, cancelled))
    with get_sessionmaker(url)() as s:
        queue.cancel_job(s, cancelled)
    wait_until(lambda: get_job(url, cancelled).status == CANCELLED, 60, "the cancel")
    wait_until(lambda: not _alive(pid), 30, "the cancelled job's process to end")

    timed_out = submit_job(url, stage="sleep", overrides=["stage.seconds=120"], timeout_s=2, max_attempts=1)
    wait_until(lambda: get_job(url, timed_out).status == FAILED, 90, "the timeout")
    assert "timeout" in (get_job(url, timed_out).error or "").lower()

    resumed = submit_job(url, stage="sleep", overrides=["stage.seconds=3"])
    progress = home / "jobs" / str(resumed) / "run" / "sleep_progress.json"

    def slept() -> float:
        try:
            return json.loads(progress.read_text())["slept_s"]
        except (OSError, ValueError, KeyError):
            return 0.0

    wait_until(lambda: slept() >= 0.75, 60, "the job to make progress")
    assert "== warm start" in _log(home, resumed).read_text()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    assert (get_job(url, resumed).status, get_job(url, resumed).resume) == (QUEUED, True)

    second = spawn_worker(url, home, warm=True)
    wait_until(lambda: "warm launcher ready" in Path(second.log_path).read_text(), 180, "the second worker's launcher")
    wait_until(lambda: get_job(url, resumed).status == SUCCEEDED, 120, "the requeued job to finish")
    with get_sessionmaker(url)() as s:
        summary = query_results(s, job_id=resumed)[0][0].summary
    assert summary["resumed_from_s"] >= 0.75  # continued from the first attempt's progress

    orphaned = submit_job(url, stage="sleep", overrides=["stage.seconds=120"])
    wait_until(lambda: _sleep_pid(_log(home, orphaned)) is not None, 60, "the job to run")
    assert "== warm start" in _log(home, orphaned).read_text()
    pid = _sleep_pid(_log(home, orphaned))
    assert get_job(url, orphaned).status == RUNNING
    second.send_signal(signal.SIGKILL)  # the worker dies: its launcher, then its job, die with it
    wait_until(lambda: not _alive(pid), 30, "the job of a killed worker to die")

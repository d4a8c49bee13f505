"""The worker agent as a real process running real `ptmlab.run` subprocesses (stage=sleep):
GPU grants, results, failures with log tails, timeouts, cancel (process group killed), SIGTERM
requeue with resume, and the queue CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from queue_by_url import get_job, list_attempts, sleep_pid, submit_job
from waiting import wait_until

from ptmlab import queue
from ptmlab.db import CANCELLED, FAILED, QUEUED, RUNNING, SUCCEEDED, TERMINAL_STATES, get_sessionmaker, session_scope
from ptmlab.results import query_results


@pytest.fixture()
def sqlite_url(tmp_path):
    from ptmlab.db import dispose_engines

    yield f"sqlite:///{tmp_path / 'platform.db'}"
    dispose_engines()


def _pid_from_log(url, job_id) -> int | None:
    with get_sessionmaker(url)() as s:
        return sleep_pid(queue.read_log(s, job_id).text)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_worker_outcomes(sqlite_url, tmp_path, spawn_worker):
    home = tmp_path / "home"
    gpu = submit_job(sqlite_url, stage="sleep", gpus=2, tags={"kind": "gpu"})
    cpu = submit_job(sqlite_url, stage="sleep", overrides=["seed=5"])
    exits = submit_job(sqlite_url, stage="sleep", overrides=["stage.exit_code=3"])
    crashes = submit_job(sqlite_url, stage="sleep", overrides=["stage.fail=true"])
    slow = submit_job(sqlite_url, stage="sleep", overrides=["stage.seconds=60"], timeout_s=1.5)
    worker = spawn_worker(sqlite_url, home, "--gpus", "0,1", "--cpu-slots", "2", "--burst")
    assert worker.wait(timeout=120) == 0, Path(worker.log_path).read_text()[-3000:]

    with get_sessionmaker(sqlite_url)() as s:
        jobs = {j: queue.get_job(s, j) for j in (gpu, cpu, exits, crashes, slow)}
        results = {r.job_id: r for r in query_results(s, kind="sleep")[0]}
    assert {j: jobs[j].status for j in jobs} == {
        gpu: SUCCEEDED,
        cpu: SUCCEEDED,
        exits: FAILED,
        crashes: FAILED,
        slow: FAILED,
    }
    # The GPU job saw exactly its granted GPUs; a CPU job sees none.
    assert results[gpu].summary["cuda_visible_devices"] == "0,1" and results[gpu].tags == {"kind": "gpu"}
    assert results[cpu].summary["cuda_visible_devices"] == "" and results[cpu].summary["seed"] == 5
    assert results[cpu].summary["job_id"] == str(cpu) and set(results) == {gpu, cpu}
    assert Path(results[cpu].summary["run_dir"]) == home / "jobs" / str(cpu) / "run"
    assert jobs[exits].exit_code == 3 and "exit code 3" in jobs[exits].error
    assert "exiting with code 3" in jobs[exits].error  # the log tail
    assert "fails on purpose" in jobs[crashes].error
    assert "timed out after 1.5 s" in jobs[slow].error
    log = Path(list_attempts(sqlite_url, cpu)[0].log_path)
    assert log.is_file() and "sleep: 0.10/0.10 s" in log.read_text()
    # A job log starts with the command and ends with a one-line outcome.
    lines = log.read_text().splitlines()
    assert lines[1].startswith("== ") and "-m ptmlab.run stage=sleep" in lines[1]
    assert re.fullmatch(r"== succeeded after [\d.]+ s \(attempt 1\)", lines[-1]), lines[-1]
    last = Path(list_attempts(sqlite_url, exits)[0].log_path).read_text().splitlines()[-1]
    assert last.startswith("== failed: exit code 3 after "), last


def test_cancel_running_job_kills_its_process_group(sqlite_url, tmp_path, spawn_worker):
    job = submit_job(sqlite_url, stage="sleep", overrides=["stage.seconds=120"])
    spawn_worker(sqlite_url, tmp_path / "home")
    pid = wait_until(lambda: _pid_from_log(sqlite_url, job), 60, "the job to start")
    assert _group_alive(pid)
    with get_sessionmaker(sqlite_url)() as s:
        queue.cancel_job(s, job)
    asked = time.monotonic()
    wait_until(lambda: not _group_alive(pid), 5, "the job's process group to be gone", interval=0.05)
    print(f"process group gone {time.monotonic() - asked:.2f} s after cancel")
    wait_until(lambda: get_job(sqlite_url, job).status == CANCELLED, 10, "the job to show cancelled")
    assert list_attempts(sqlite_url, job)[-1].status == CANCELLED


def test_progress_reaches_the_job_while_it_runs_and_stays_after_a_kill(sqlite_url, tmp_path, spawn_worker):
    job = submit_job(sqlite_url, stage="sleep", overrides=["stage.seconds=30"])
    spawn_worker(sqlite_url, tmp_path / "home")
    first = wait_until(lambda: (get_job(sqlite_url, job).progress or {}).get("step"), 60, "the job's first progress")
    later = wait_until(
        lambda: (p := (get_job(sqlite_url, job).progress or {}).get("step", 0)) > first and p,
        10,
        "its progress to advance",
    )
    progress = get_job(sqlite_url, job).progress
    assert progress["phase"] == "sleeping" and progress["total_steps"] == 120 and progress["eta_s"] > 0
    with get_sessionmaker(sqlite_url)() as s:  # what the API lists: the latest numbers, no history
        listed = queue.get_job(s, job).to_dict()["progress"]
    assert listed["step"] >= later and "history" not in listed
    with get_sessionmaker(sqlite_url)() as s:
        queue.cancel_job(s, job)
    wait_until(lambda: get_job(sqlite_url, job).status == CANCELLED, 15, "the job to show cancelled")
    last = get_job(sqlite_url, job).progress
    assert last["step"] >= later and last["step"] < 120  # where it was when it was killed


def test_sigterm_requeues_and_the_rerun_resumes(sqlite_url, tmp_path, spawn_worker):
    home = tmp_path / "home"
    job = submit_job(sqlite_url, stage="sleep", overrides=["stage.seconds=3"])
    first = spawn_worker(sqlite_url, home)
    progress = home / "jobs" / str(job) / "run" / "sleep_progress.json"

    def slept() -> float:
        try:
            return json.loads(progress.read_text())["slept_s"]
        except (OSError, ValueError):
            return 0.0

    wait_until(lambda: slept() >= 0.75, 60, "the job to make progress")
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=30) == 0
    j = get_job(sqlite_url, job)
    assert (j.status, j.resume) == (QUEUED, True)
    second = spawn_worker(sqlite_url, home, "--burst")
    assert second.wait(timeout=60) == 0
    assert get_job(sqlite_url, job).status == SUCCEEDED
    assert [a.status for a in list_attempts(sqlite_url, job)] == ["requeued", SUCCEEDED]
    with get_sessionmaker(sqlite_url)() as s:
        summary = query_results(s, job_id=job)[0][0].summary
    assert summary["resumed_from_s"] >= 0.75  # continued from the first attempt's progress


def test_cli_submit_status_logs_cancel_retry(sqlite_url, tmp_path, spawn_worker, capsys, monkeypatch):
    from ptmlab.cli import main

    def cli(*argv) -> tuple[int, str, str]:
        try:
            main([*argv])
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = cli("submit", "--database-url", sqlite_url, "stage=sleep", "stage.seconds=0.2", "--name", "first")
    assert code == 0 and out.startswith("job 1 queued")
    code, _, err = cli("submit", "--database-url", sqlite_url, "stage=sleep", "stage.nope=1")
    assert code == 2 and err.startswith("error[config_error]") and "nope" in err and err.count("\n") == 1
    code, out, _ = cli("submit", "--database-url", sqlite_url, "--after", "1", "stage=sleep", "stage.seconds=60")
    assert code == 0 and out.startswith("job 2 queued")
    code, out, _ = cli("status", "--database-url", sqlite_url, "--json")
    assert json.loads(out)["total"] == 2
    code, out, _ = cli("cancel", "--database-url", sqlite_url, "1")
    assert "cancelled" in out
    assert get_job(sqlite_url, 2).status == FAILED  # its parent was cancelled
    code, out, _ = cli("retry", "--database-url", sqlite_url, "1")
    assert "queued" in out and get_job(sqlite_url, 2).status == QUEUED
    code, _, err = cli("retry", "--database-url", sqlite_url, "1")
    assert code == 2 and "error[conflict]" in err
    spawn_worker(sqlite_url, tmp_path / "home")
    wait_until(lambda: _pid_from_log(sqlite_url, 2), 60, "job 2 to run after job 1")
    assert get_job(sqlite_url, 2).status == RUNNING
    code, out, _ = cli("logs", "--database-url", sqlite_url, "1")
    assert "sleep: 0.20/0.20 s" in out
    code, out, _ = cli("cancel", "--database-url", sqlite_url, "2")
    assert "cancel requested" in out
    code, out, _ = cli("logs", "--database-url", sqlite_url, "2", "-f")  # returns once the job ended
    assert code == 0 and "sleep: pid" in out and get_job(sqlite_url, 2).status in TERMINAL_STATES
    code, out, _ = cli("status", "--database-url", sqlite_url, "2")
    assert "cancelled" in out and "attempt 1" in out
    code, out, _ = cli("status", "--database-url", sqlite_url, "--workers")
    assert "active" in out
    # --wait draws one line per job with its bar (into a pipe: again only when it moved on)
    code, out, _ = cli(
        "submit", "--database-url", sqlite_url, "--wait", "stage=sleep", "stage.seconds=1.5", "--name", "waited"
    )
    assert code == 0, out
    lines = [ln for ln in out.splitlines() if "waited" in ln]
    # a 1.5 s job polled every second: its running line may or may not have caught a bar yet
    assert re.search(r"waited\s+running", "\n".join(lines)), out
    assert re.search(r"waited\s+succeeded\s+\[#{20}\] 6/6$", lines[-1]), out
    waited = int(lines[-1].split()[1])
    code, out, _ = cli("status", "--database-url", sqlite_url, str(waited))
    assert "progress: [####################] 6/6" in out, out


def test_sigterm_with_grace_period_lets_running_jobs_finish(sqlite_url, tmp_path, spawn_worker):
    running = submit_job(sqlite_url, stage="sleep", overrides=["stage.seconds=1.5"])
    worker = spawn_worker(sqlite_url, tmp_path / "home", "--grace-s", "60")
    wait_until(lambda: _pid_from_log(sqlite_url, running), 60, "the job to start")
    waiting = submit_job(sqlite_url, stage="sleep")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    assert get_job(sqlite_url, running).status == SUCCEEDED
    assert get_job(sqlite_url, waiting).status == QUEUED  # a draining worker claims nothing new


def test_a_summary_that_breaks_its_contract_fails_the_job_naming_the_field(tmp_path, spawn_worker):
    from ptmlab.contracts import SUMMARY_BY_KIND

    url = f"sqlite:///{tmp_path / 'platform.db'}"
    with session_scope(url) as s:
        bad = queue.submit_job(
            s, stage="sleep", overrides=["stage.seconds=0.1", "stage.break_summary=true"], max_attempts=1
        ).id
        good = queue.submit_job(s, stage="sleep", overrides=["stage.seconds=0.1"]).id
    spawn_worker(url, tmp_path / "home")

    def done():
        with session_scope(url) as s:
            jobs = [queue.get_job(s, bad), queue.get_job(s, good)]
            return jobs if all(j.status in ("succeeded", "failed") for j in jobs) else None

    bad_job, good_job = wait_until(done, 60, "both jobs to finish")
    assert bad_job.status == "failed" and "seconds" in bad_job.error and "summary.json" in bad_job.error
    assert good_job.status == "succeeded"
    with session_scope(url) as s:
        rows, _ = query_results(s)
        assert [r.job_id for r in rows] == [good]  # no row for the broken summary
        SUMMARY_BY_KIND["sleep"].model_validate(rows[0].summary)

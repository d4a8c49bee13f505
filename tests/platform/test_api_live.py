"""The API as a real `ptmlab serve` (uvicorn) process on a free loopback port: restarting it
mid-sweep loses no job, and a property-based run of schemathesis against /openapi.json gets no
5xx."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from conftest import wait_until

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveApi:
    def __init__(self, db_url: str, home: Path, log_dir: Path):
        self.db_url, self.home, self.log_dir = db_url, home, log_dir
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        log = open(self.log_dir / f"api-{self.starts}.log", "wb")
        self.starts += 1
        env = {**os.environ, "PTMLAB_HOME": str(self.home), "PTMLAB_DATABASE_URL": self.db_url,
               "PTMLAB_API_TOKEN": ""}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ptmlab.cli", "serve", "--port", str(self.port), "--log-level", "warning"],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        self.log_path = log.name
        log.close()

        def healthy():
            if self.proc.poll() is not None:
                pytest.fail(f"API exited: {Path(self.log_path).read_text()[-2000:]}")
            try:
                return httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, 60, "the API to answer /healthz")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)


@pytest.fixture()
def live_api(tmp_path):
    from ptmlab.db import dispose_engines

    api = LiveApi(f"sqlite:///{tmp_path / 'platform.db'}", tmp_path / "home", tmp_path)
    yield api
    api.kill()
    dispose_engines()


def test_restart_api_mid_sweep_loses_no_job(live_api, spawn_worker):
    live_api.start()
    r = httpx.post(f"{live_api.base}/api/v1/sweeps", timeout=30,
                   json={"overrides": ["stage=sleep", "stage.seconds=0.05", "seed=range(0,8)"], "name": "restart"})
    assert r.status_code == 201, r.text
    sweep = r.json()
    assert sweep["count"] == 8

    live_api.kill()  # kill -9: no graceful shutdown
    live_api.start()
    page = httpx.get(f"{live_api.base}/api/v1/jobs", params={"sweep_id": sweep["id"]}, timeout=10).json()
    assert page["total"] == 8 and {j["status"] for j in page["jobs"]} == {"queued"}
    assert sorted(j["id"] for j in page["jobs"]) == sorted(sweep["job_ids"])

    worker = spawn_worker(live_api.db_url, live_api.home, "--burst")
    assert worker.wait(timeout=150) == 0, Path(worker.log_path).read_text()[-2000:]
    page = httpx.get(f"{live_api.base}/api/v1/jobs", params={"sweep_id": sweep["id"]}, timeout=10).json()
    assert [j["status"] for j in page["jobs"]] == ["succeeded"] * 8
    assert all(j["attempts"] == 1 for j in page["jobs"])
    results = httpx.get(f"{live_api.base}/api/v1/results", params={"sweep_id": sweep["id"]}, timeout=10).json()
    assert results["total"] == 8


def test_schemathesis_finds_no_server_error(live_api, tmp_path):
    live_api.start()
    # A few jobs so that per-id routes also reach existing rows.
    for seed in range(3):
        httpx.post(f"{live_api.base}/api/v1/jobs", json={"stage": "sleep", "seed": seed}, timeout=30)
    exe = Path(sys.executable).parent / "schemathesis"
    proc = subprocess.run(
        [str(exe), "run", f"{live_api.base}/openapi.json", "--checks", "not_a_server_error",
         "--max-examples", "10", "--phases", "examples,coverage,fuzzing", "--seed", "1", "--no-shrink",
         "--workers", "1", "--max-time", "45", "--request-timeout", "30",
         "--generation-allow-x00", "true"],
        capture_output=True, text=True, timeout=150, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    print(out[-3000:])
    assert proc.returncode == 0, out[-4000:]

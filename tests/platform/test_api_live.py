"""The API as a real `ptmlab serve` (uvicorn) process on a free loopback port: restarting it
mid-sweep loses no job, and a property-based run of schemathesis against /openapi.json gets no
5xx."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from api_server import LiveApi
from waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture()
def live_api(tmp_path):
    from ptmlab.db import dispose_engines

    api = LiveApi(f"sqlite:///{tmp_path / 'platform.db'}", tmp_path / "home", tmp_path)
    yield api
    api.kill()
    dispose_engines()


def test_restart_api_mid_sweep_loses_no_job(live_api, spawn_worker):
    live_api.start()
    spawn_worker(live_api.db_url, live_api.home)  # runs the sweep while the API goes down
    r = httpx.post(
        f"{live_api.base}/api/v1/sweeps",
        timeout=30,
        json={"overrides": ["stage=sleep", "stage.seconds=0.3", "seed=range(0,8)"], "name": "restart"},
    )
    assert r.status_code == 201, r.text
    sweep = r.json()
    assert sweep["count"] == 8

    def statuses() -> list[str]:
        page = httpx.get(f"{live_api.base}/api/v1/jobs", params={"sweep_id": sweep["id"]}, timeout=10).json()
        return [j["status"] for j in page["jobs"]]

    # Mid-sweep: some job has started and some are still queued.
    wait_until(
        lambda: {"running", "succeeded"} & set(statuses()) and "queued" in statuses(),
        120,
        "the worker to start the sweep",
    )
    live_api.kill()  # kill -9: no graceful shutdown
    live_api.start()
    page = httpx.get(f"{live_api.base}/api/v1/jobs", params={"sweep_id": sweep["id"]}, timeout=10).json()
    assert page["total"] == 8 and sorted(j["id"] for j in page["jobs"]) == sorted(sweep["job_ids"])

    wait_until(lambda: statuses() == ["succeeded"] * 8, 180, "every job of the sweep to succeed")
    page = httpx.get(f"{live_api.base}/api/v1/jobs", params={"sweep_id": sweep["id"]}, timeout=10).json()
    assert all(j["attempts"] == 1 for j in page["jobs"])  # each ran exactly once
    results = httpx.get(f"{live_api.base}/api/v1/results", params={"sweep_id": sweep["id"]}, timeout=10).json()
    assert results["total"] == 8 and sorted(r["job_id"] for r in results["results"]) == sorted(sweep["job_ids"])


def test_schemathesis_finds_no_server_error(live_api, tmp_path):
    live_api.start()
    # A few jobs so that per-id routes also reach existing rows.
    for seed in range(3):
        httpx.post(f"{live_api.base}/api/v1/jobs", json={"stage": "sleep", "seed": seed}, timeout=30)
    exe = Path(sys.executable).parent / "schemathesis"
    proc = subprocess.run(
        [
            str(exe),
            "run",
            f"{live_api.base}/openapi.json",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            "10",
            "--phases",
            "examples,coverage,fuzzing",
            "--seed",
            "1",
            "--no-shrink",
            "--workers",
            "1",
            "--max-time",
            "45",
            "--request-timeout",
            "30",
            "--generation-allow-x00",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    print(out[-3000:])
    assert proc.returncode == 0, out[-4000:]

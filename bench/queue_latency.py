"""Queue benchmarks on SQLite (WAL) and on a real PostgreSQL server (started here on loopback
when Debian's binaries are installed), printed as numbers:

  * submit → running latency with one idle worker (p50, p95): a real `ptmlab worker` process,
    jobs of `stage=sleep` submitted one at a time (measured from the job's created_at to its
    attempt's started_at, both stamped by the database clients on this host);
  * jobs/s accepted by the queue (one submit_job transaction each), and by the REST API when
    ptmlab.api exists (a real uvicorn server, POST /api/v1/jobs);
  * time to enqueue a 1,000-job sweep (one submit_sweep transaction);
  * results query time with 10,000 result rows (a page, a tag filter, the leaderboard's read).

    .venv/bin/python bench/queue_latency.py [--latency-jobs 20] [--no-postgres]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "platform"))

from ptmlab import queue
from ptmlab.db import Result, dispose_engines, get_sessionmaker, utcnow
from ptmlab.results import query_results


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def bench_latency(url: str, home: Path, n: int) -> str:
    env = {**os.environ, "PTMLAB_HOME": str(home), "PTMLAB_DATABASE_URL": url}
    worker = subprocess.Popen(
        [sys.executable, "-m", "ptmlab.cli", "worker", "--poll-s", "0.5"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    maker = get_sessionmaker(url)
    latencies = []
    try:
        time.sleep(3)  # let the worker start and go idle
        for _ in range(n):
            with maker() as s:
                job_id = queue.submit_job(s, stage="sleep", overrides=["stage.seconds=0"]).id
            while True:
                with maker() as s:
                    job = queue.get_job(s, job_id)
                    if job.status not in ("queued", "running"):
                        attempt = queue.list_attempts(s, job_id)[0]
                        latencies.append((attempt.started_at - job.created_at).total_seconds())
                        break
                time.sleep(0.05)
            # Submit at a random phase of the idle worker's poll cycle, not in step with it.
            time.sleep(random.uniform(0.6, 1.6))
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    return (
        f"submit->running with one idle worker (poll 0.5 s), {n} jobs: "
        f"p50 {pct(latencies, 0.5) * 1000:.0f} ms, p95 {pct(latencies, 0.95) * 1000:.0f} ms"
    )


def bench_submit_rate(url: str, n: int = 300) -> str:
    maker = get_sessionmaker(url)
    with maker() as s:
        t = time.perf_counter()
        for i in range(n):
            queue.submit_job(s, stage="sleep", overrides=[f"stage.seconds={i}"], queue="bench")
        dt = time.perf_counter() - t
    return f"jobs accepted by the queue (one transaction each): {n / dt:.0f} jobs/s"


def bench_sweep(url: str, n: int = 1000) -> str:
    maker = get_sessionmaker(url)
    jobs = [
        {"stage": "sleep", "overrides": [f"stage.seconds={i % 7}", f"+tags.i={i}"], "queue": "bench"} for i in range(n)
    ]
    with maker() as s:
        t = time.perf_counter()
        queue.submit_sweep(s, jobs, name="bench")
        dt = time.perf_counter() - t
    return f"enqueue a {n}-job sweep: {dt:.2f} s"


def bench_results(url: str, n: int = 10_000) -> str:
    from ptmlab.results import read_rows

    maker = get_sessionmaker(url)
    with maker() as s:
        now = utcnow()
        s.add_all(
            Result(
                kind="finetune" if i % 2 else "probe",
                mlflow_run_id=f"{i:032x}",
                sweep_id=f"s{i % 10}",
                summary={
                    "stage": "finetune",
                    "task": "sst2",
                    "model": f"m{i % 5}",
                    "objective": "mlm",
                    "adaptation": "full",
                    "seed": i % 3,
                    "metrics": {"accuracy": (i % 100) / 100},
                },
                tags={"group": f"g{i % 20}"},
                created_at=now,
            )
            for i in range(n)
        )
        s.commit()
        timings = {}
        for label, kwargs in (
            ("newest 50 of a kind", {"kind": "finetune", "limit": 50}),
            ("a sweep, page 3", {"sweep_id": "s3", "limit": 50, "offset": 100}),
            ("tag filter", {"tags": {"group": "g7"}, "limit": 50}),
        ):
            t = time.perf_counter()
            for _ in range(5):
                rows, total = query_results(s, **kwargs)
            timings[label] = (time.perf_counter() - t) / 5 * 1000
    t = time.perf_counter()
    summaries = read_rows(url, kind="finetune")
    board_ms = (time.perf_counter() - t) * 1000
    parts = ", ".join(f"{k} {v:.1f} ms" for k, v in timings.items())
    return f"results query at {n} rows: {parts}; leaderboard read of {len(summaries)} summaries {board_ms:.0f} ms"


def bench_api(url: str, home: Path, n: int = 200) -> str:
    import importlib.util

    if importlib.util.find_spec("ptmlab.api") is None:
        return "jobs/s accepted by the API: skipped (ptmlab.api not present)"
    import httpx
    from pg import free_port

    port = free_port()
    env = {**os.environ, "PTMLAB_HOME": str(home), "PTMLAB_DATABASE_URL": url}
    server = subprocess.Popen(
        [sys.executable, "-m", "ptmlab.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(200):
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            body = {"overrides": ["stage=sleep", "stage.seconds=0"], "queue": "bench"}
            r = client.post("/api/v1/jobs", json=body)
            if r.status_code >= 300:
                return f"jobs/s accepted by the API: skipped (POST /api/v1/jobs -> {r.status_code}: {r.text[:200]})"
            t = time.perf_counter()
            for _ in range(n):
                client.post("/api/v1/jobs", json=body).raise_for_status()
            dt = time.perf_counter() - t
        return f"jobs accepted by the API (POST /api/v1/jobs, config validated, sequential): {n / dt:.0f} jobs/s"
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


def run_all(label: str, url: str, home: Path, args) -> None:
    print(f"\n== {label}", flush=True)
    for fn in (
        lambda: bench_latency(url, home, args.latency_jobs),
        lambda: bench_submit_rate(url),
        lambda: bench_sweep(url),
        lambda: bench_results(url),
        lambda: bench_api(url, home),
    ):
        print("  " + fn(), flush=True)
    dispose_engines()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-jobs", type=int, default=20)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ptmlab-bench-") as tmp:
        home = Path(tmp) / "home"
        run_all("SQLite (WAL)", f"sqlite:///{Path(tmp) / 'platform.db'}", home, args)
        from pg import find_pg_bin, start_postgres

        if args.no_postgres or find_pg_bin() is None:
            print("\n== PostgreSQL: skipped (no server binaries)" if not args.no_postgres else "")
            return
        server = start_postgres()
        try:
            run_all("PostgreSQL (loopback, fsync off)", server.create_database("bench"), Path(tmp) / "home_pg", args)
        finally:
            server.stop()


if __name__ == "__main__":
    main()

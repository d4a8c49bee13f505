"""Dashboard response times at 10,000 result rows (`--rows 100000`: the goal set for the project)
and 20,000 jobs (`--jobs`): each view of /api/v1/views, the job, sweep, pipeline and result lists
(and the HTML pages that carry data) through a real `ptmlab serve` on loopback, p50/p95 over
repeated requests, printed (goal: p50 under 300 ms fresh, 100 ms repeat). SQLite (WAL), and
PostgreSQL when its binaries exist.

The chart pages on a first visit (cold cache, a new browser context per visit, Debian's Chromium
through Playwright, 1,400 px): first contentful paint and the moment the first chart is drawn, as
served ("after": the vendored partial Plotly bundle, gzip-compressed) and "before" (Plotly's full
4.8 MB bundle sent uncompressed, put in its place in the browser), interleaved (goal: the first
chart ≤ 0.5 s). `--paint-only` measures only these (no view timings, no PostgreSQL).

Two figures per view: "fresh" — a result row of the view's kind (a job, for the job
lists) is inserted before every request, so the view must take it in (what the first visitor
after a job finishes waits); "repeat" — the same data asked again (the views cache on (count,
max id) of the kind's rows, which is what the live pages polling every few seconds get).

The seeded jobs: finetune/probe/compress/pretrain jobs in every state, a tenth of them in the 5
sweeps the results name, 200 pipelines of 10 (each probe job depending on the fine-tune before
it: the probe-drift view's lineage), the first results rows each written by one of them.

    .venv/bin/python bench/dashboard_latency.py [--rows 10000] [--jobs 20000] [--requests 15] [--no-postgres] [--paint-visits 5] [--paint-only]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "platform"))

from synthetic_results import compress_summary, finetune_summary, probe_summary, synthetic_summaries

from ptmlab.db import dispose_engines, migrate, session_scope
from ptmlab.db.models import Job, JobDependency, Pipeline, Sweep
from ptmlab.results import new_result

GOAL_MS = 300  # p50, fresh
REPEAT_GOAL_MS = 100  # p50, repeat
PAINT_GOAL_MS = 500  # a chart page's first chart on a cold first visit
BENCH_QUEUE = "bench"  # no worker takes jobs from it


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


JOB_STAGES = ("finetune", "probe", "compress", "pretrain")
JOB_STATES = ("succeeded", "succeeded", "succeeded", "failed", "cancelled", "queued", "running", "pruned")


def seed_jobs(s, n: int) -> list[int]:
    """`n` jobs (see the module's docstring); their ids."""
    s.add_all([Sweep(id=f"sweep{i}", name=f"sweep {i}", spec={}, job_count=n // 50) for i in range(5)])
    pipelines = [Pipeline(id=f"pipe{i:04d}", name=f"pipeline {i}", spec={}) for i in range(min(200, n // 10))]
    s.add_all(pipelines)
    s.flush()
    jobs = []
    for i in range(n):
        status = JOB_STATES[i % len(JOB_STATES)]
        swept = [f"stage.lr={(1e-5, 1e-4, 1e-3)[(i // 10) % 3]}"] if i % 10 == 0 else []  # sweep0 varies the lr
        jobs.append(
            Job(
                name=f"job{i}",
                stage=JOB_STAGES[i % len(JOB_STAGES)],
                overrides=["model=bert_tiny", *swept],
                queue=BENCH_QUEUE,
                status=status,
                sweep_id=f"sweep{i % 5}" if i % 10 == 0 else None,
                pipeline_id=pipelines[i // 10].id if i // 10 < len(pipelines) else None,
                tags={"suite": "glue"},
                attempts=0 if status == "queued" else 1,
            )
        )
    s.add_all(jobs)
    s.flush()
    # within a pipeline: job 4k+1 (a probe) depends on job 4k (a fine-tune)
    s.add_all(
        [
            JobDependency(job_id=jobs[i].id, parent_id=jobs[i - 1].id)
            for i in range(1, len(pipelines) * 10)
            if i % 4 == 1
        ]
    )
    return [j.id for j in jobs]


def seed(url: str, rows: int, jobs: int = 0) -> dict[str, list[int]]:
    migrate(url)
    with session_scope(url) as s:
        job_ids = seed_jobs(s, jobs) if jobs else []
        batch = [
            new_result(
                x,
                sweep_id=f"sweep{i % 5}",
                tags={"suite": "glue" if i % 2 else "other"},
                job_id=job_ids[i] if i < len(job_ids) else None,
            )
            for i, x in enumerate(synthetic_summaries(rows))
        ]
        s.add_all(batch)
        s.commit()
        ids = {
            "finetune": [r.id for r in batch if r.kind == "finetune"][:3],
            "finetune_jobs": [r.job_id for r in batch if r.kind == "finetune" and r.job_id is not None][:3],
            "drift": [job_ids[0]] if job_ids else [],
        }
    dispose_engines()
    return ids


def fresh_row(kind: str, rng: random.Random):
    if kind == "job":
        return Job(name=f"fresh{rng.randint(0, 10**9)}", stage="finetune", overrides=[], queue=BENCH_QUEUE)
    if kind == "finetune":
        return new_result(finetune_summary(rng, "bert_tiny", "mlm", "full", "sst2", rng.randint(100, 10**6)))
    if kind == "compress":
        return new_result(compress_summary(rng, "distill", "bert_tiny", "sst2", rng.randint(0, 10**6)))
    return new_result(probe_summary(rng, "bert_tiny", "pos", rng.randint(0, 10**6)))


def measure(base: str, url: str, path: str, kind: str | None, requests: int, fresh: bool) -> list[float]:
    rng = random.Random(0)
    times = []
    with httpx.Client(base_url=base, timeout=60) as client:
        client.get(path).raise_for_status()  # warm the connection and the process's imports
        for _ in range(requests):
            if fresh and kind:
                with session_scope(url) as s:
                    s.add(fresh_row(kind, rng))
            start = time.perf_counter()
            r = client.get(path)
            times.append(1000 * (time.perf_counter() - start))
            r.raise_for_status()
    return times


CHROMIUM = "/usr/bin/chromium"
# The first-contentful-paint entry, waited for (it may be recorded after `load`).
FCP_JS = """() => new Promise((resolve) => {
  new PerformanceObserver((list) => {
    const e = list.getEntriesByName('first-contentful-paint')[0];
    if (e) resolve(e.startTime);
  }).observe({ type: 'paint', buffered: true });
  setTimeout(() => resolve(null), 10000);
})"""
# The moment the page's first Plotly chart is in the DOM (ms since navigation), checked every frame.
CHART_JS = "() => document.querySelector('.js-plotly-plot .main-svg') ? performance.now() : false"
PAINT_PAGES = ("/compression", "/probing", "/probing/drift?source={drift}", "/sweeps/sweep0")  # pages that load Plotly


def full_plotly_bundle() -> bytes | None:
    """Plotly's whole bundle as the dashboard sent it before the partial one (the `plotly` package's copy)."""
    try:
        import plotly
    except ImportError:
        return None
    path = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
    return path.read_bytes() if path.is_file() else None


def first_paint(base: str, visits: int, drift_source: int | None = None) -> None:
    """Cold first visits (a new browser context each): the median first contentful paint and the
    time until the first chart is drawn, per chart page, as served now ("after": the partial Plotly
    bundle, gzip-compressed) and as before ("before": Plotly's 4.8 MB full bundle sent uncompressed,
    put in place of the served one in the browser), interleaved."""
    from playwright.sync_api import sync_playwright

    full = full_plotly_bundle()

    def as_before(route):
        route.fulfill(status=200, body=full, headers={"content-type": "text/javascript"})

    variants = ("after", "before") if full else ("after",)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        header = " ".join(f"{f'{v} paint':>13} {f'{v} chart':>13}" for v in variants)
        print(f"\n{'cold first visit':<26} {header}  (ms, median of {visits}; goal: chart ≤ {PAINT_GOAL_MS} ms)")
        for path in PAINT_PAGES:
            if "{drift}" in path:
                if drift_source is None:
                    continue
                path = path.format(drift=drift_source)
            times: dict[str, dict[str, list[float]]] = {v: {"paint": [], "chart": []} for v in variants}
            for _ in range(visits):
                for variant in variants:
                    context = browser.new_context(viewport={"width": 1400, "height": 900})
                    page = context.new_page()
                    if variant == "before":
                        page.route("**/static/vendor/plotly.min.js*", as_before)
                    page.goto(base + path, wait_until="commit")
                    try:
                        chart = float(page.wait_for_function(CHART_JS, polling="raf", timeout=15_000).json_value())
                    except Exception:
                        chart = float("nan")
                    fcp = page.evaluate(FCP_JS)
                    times[variant]["paint"].append(float(fcp) if fcp is not None else float("nan"))
                    times[variant]["chart"].append(chart)
                    context.close()
            cells = " ".join(
                f"{statistics.median(times[v]['paint']):>13.0f} {statistics.median(times[v]['chart']):>13.0f}"
                for v in variants
            )
            print(f"{path:<26} {cells}", flush=True)
        browser.close()


def run_all(
    label: str,
    url: str,
    home: Path,
    rows: int,
    requests: int,
    paint_visits: int = 0,
    jobs: int = 0,
    paint_only: bool = False,
) -> None:
    home.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    ids = seed(url, rows, jobs)
    print(f"\n== {label}: {rows} result rows and {jobs} jobs seeded in {time.perf_counter() - t0:.1f} s")
    port = free_port()
    env = {**os.environ, "PTMLAB_HOME": str(home), "PTMLAB_DATABASE_URL": url}
    env.pop("PTMLAB_API_TOKEN", None)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ptmlab.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the API did not start")
            time.sleep(0.2)
        compared_jobs = ",".join(map(str, ids["finetune_jobs"]))
        views = [
            ("GLUE leaderboard", "/api/v1/views/leaderboard", "finetune"),
            ("leaderboard, tag filter", "/api/v1/views/leaderboard?tag=suite%3Dglue", "finetune"),
            ("leaderboard CSV export", "/api/v1/views/leaderboard?format=csv", "finetune"),
            ("compression + Pareto", "/api/v1/views/compression", "compress"),
            ("probing", "/api/v1/views/probing", "probe"),
            ("overview (JSON)", "/api/v1/views/overview", None),
            ("overview page (HTML)", "/", None),
            ("compare 3 runs", f"/api/v1/views/compare?jobs={compared_jobs}", None),
            ("runs table, by a metric", "/api/v1/views/runs?sort=main_score&column=main_score&column=task", "finetune"),
            ("runs table, filter+search", "/api/v1/views/runs?filter=main_score%3E%3D0.5&q=sst2", "finetune"),
            ("runs table, page 100", "/api/v1/views/runs?offset=4950", "finetune"),
            # a config key (the runs' `hparams`) as a group: mean ± std, n, min/max per value
            (
                "runs grouped by stage.lr",
                "/api/v1/views/runs?group_by=stage.lr&column=main_score&sort=main_score",
                "finetune",
            ),
            (
                "runs grouped, 2 keys",
                "/api/v1/views/runs?kind=finetune&group_by=model,stage.lr&column=main_score"
                "&column=stage.batch_size&sort=main_score",
                "finetune",
            ),
            (
                "leaderboard by stage.lr",
                "/api/v1/views/leaderboard?group_by=model,objective,adaptation,stage.lr",
                "finetune",
            ),
            ("leaderboard, pooled", "/api/v1/views/leaderboard?group_by=model&pool=true", "finetune"),
            ("sweep page (JSON)", "/api/v1/views/sweeps/sweep0", "job"),
            ("robustness", "/api/v1/views/robustness", "finetune"),
            ("results list", "/api/v1/results?kind=finetune&tag=suite%3Dglue", "finetune"),
            ("jobs list", "/api/v1/jobs", "job"),
            ("jobs list, status", "/api/v1/jobs?status=failed", "job"),
            ("jobs list, stage page 21", "/api/v1/jobs?stage=finetune&offset=1000", "job"),
            ("sweeps list", "/api/v1/sweeps", "job"),
            ("pipelines list", "/api/v1/pipelines", "job"),
            ("pipelines page (HTML)", "/pipelines?offset=100", "job"),
            ("probe-drift sources", "/api/v1/views/probe-drift", "job"),
        ]
        if ids["drift"]:
            views.append(("probe drift, one source", f"/api/v1/views/probe-drift?source={ids['drift'][0]}", "job"))
        if paint_only:
            views = []
        if views:
            print(
                f"{'view':<26} {'fresh p50':>10} {'fresh p95':>10} {'repeat p50':>11} {'repeat p95':>11}  (ms, {requests} requests)"
            )
        worst, worst_repeat = 0.0, 0.0
        for name, path, kind in views:
            fresh = measure(base, url, path, kind, requests, fresh=True)
            repeat = measure(base, url, path, kind, requests, fresh=False)
            worst, worst_repeat = max(worst, statistics.median(fresh)), max(worst_repeat, statistics.median(repeat))
            print(
                f"{name:<26} {statistics.median(fresh):>10.1f} {pct(fresh, 0.95):>10.1f} "
                f"{statistics.median(repeat):>11.1f} {pct(repeat, 0.95):>11.1f}",
                flush=True,
            )
        verdict = "under" if worst <= GOAL_MS else "OVER"
        verdict_repeat = "under" if worst_repeat <= REPEAT_GOAL_MS else "OVER"
        if views:
            print(
                f"slowest p50: fresh {worst:.0f} ms ({verdict} the {GOAL_MS} ms goal), repeat {worst_repeat:.0f} ms "
                f"({verdict_repeat} the {REPEAT_GOAL_MS} ms goal; {os.cpu_count()} CPU cores)"
            )
        if paint_visits and os.access(CHROMIUM, os.X_OK):
            first_paint(base, paint_visits, ids["drift"][0] if ids["drift"] else None)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs seeded beside the results")
    parser.add_argument("--requests", type=int, default=15)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--paint-visits", type=int, default=5, help="cold visits per chart page (0: skip)")
    parser.add_argument("--paint-only", action="store_true", help="only the chart pages' cold first visits")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_all(
            "SQLite (WAL)",
            f"sqlite:///{Path(tmp) / 'ptmlab.db'}",
            Path(tmp) / "home",
            args.rows,
            args.requests,
            args.paint_visits,
            args.jobs,
            args.paint_only,
        )
        if args.paint_only:
            return
        from pg import find_pg_bin, start_postgres

        if args.no_postgres or find_pg_bin() is None:
            print("\n== PostgreSQL: skipped" + ("" if args.no_postgres else " (no server binaries)"))
            return
        server = start_postgres()
        try:
            run_all(
                "PostgreSQL (loopback)",
                server.create_database("dashboard_bench"),
                Path(tmp) / "home_pg",
                args.rows,
                args.requests,
                jobs=args.jobs,
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()

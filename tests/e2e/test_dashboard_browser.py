"""The dashboard in a real browser: Debian's Chromium driven by Playwright against the real API
(`ptmlab serve` in a subprocess on a free loopback port) over a seeded SQLite database, with a
real worker for the jobs the tests start. Screenshots of every page go to
test-artifacts/screenshots/ (look at them)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from synthetic_results import SEED_COMPRESS, SEED_FINETUNE, SEED_PROBE_MODELS, SEED_PROBE_TASKS

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REPO_ROOT = Path(__file__).resolve().parents[2]
SHOTS = REPO_ROOT / "test-artifacts" / "screenshots"
# A wait, not a timing: under the suite's load a fresh Chromium's first page has taken over 20 s.
WAIT_MS = 60_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the API exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"the API did not answer {url} within {timeout} s: {log.read_text()[-2000:]}")


def require_chromium() -> None:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} missing (make test installs it: scripts/install_system_deps.sh)")


@contextlib.contextmanager
def served_home(home: Path, url: str) -> Iterator[str]:
    """`ptmlab serve` alone (no worker, no API token) for one PTMLAB_HOME and database
    (tests/platform/api_server.py's LiveApi): yields its base URL once it answers, kills it after.
    Without MLFLOW_TRACKING_URI: a stage run earlier in the test process can leave that set
    (MLflow's set_tracking_uri exports it), and the API must read the home's own store."""
    from api_server import LiveApi

    api = LiveApi(url, home, home, env={"MLFLOW_TRACKING_URI": None})
    api.start()
    try:
        yield api.base
    finally:
        api.kill()


@contextlib.contextmanager
def watched_page(width: int = 1400, height: int = 900):
    """A Chromium page that records what a visitor should never meet: console errors, page errors,
    failed requests and 4xx/5xx answers (`page.problems`; `assert_clean` reads and clears them)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        pg = browser.new_context(viewport={"width": width, "height": height}).new_page()
        pg.set_default_timeout(WAIT_MS)
        problems: list[str] = []
        pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        pg.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        pg.on("requestfailed", lambda r: problems.append(f"failed: {r.url} {r.failure}"))
        pg.on("response", lambda r: problems.append(f"{r.status}: {r.url}") if r.status >= 400 else None)
        pg.problems = problems
        try:
            yield pg
        finally:
            browser.close()


def assert_clean(page, allowed: tuple[str, ...] = ()) -> None:
    """No problem recorded since the last call but those containing one of `allowed` (an
    expected refusal: "422: ")."""
    problems = [p for p in page.problems if not any(a in p for a in allowed)]
    page.problems.clear()
    assert not problems, problems


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    """(base URL, seeded ids): a seeded database, `ptmlab serve` and a worker on queue `default`."""
    if not os.access(CHROMIUM, os.X_OK):
        msg = f"{CHROMIUM} missing (make test installs it: scripts/install_system_deps.sh)"
        if os.environ.get("PTMLAB_REQUIRE_DATA") == "1" or os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    from hand_driven_study import drive_study_by_hand
    from synthetic_results import seed_dashboard

    from ptmlab.db import dispose_engines, migrate, session_scope
    from ptmlab.studies.storage import forget_storages

    home = tmp_path_factory.mktemp("dashboard_home")
    url = f"sqlite:///{home / 'ptmlab.db'}"
    migrate(url)
    with session_scope(url) as s:
        ids = seed_dashboard(s)
    # A study with pruned and complete trials, driven before the worker starts (workers drive studies too).
    ids["study"] = drive_study_by_hand(url, n_trials=8)
    forget_storages()
    dispose_engines()
    port = _free_port()
    env = {**os.environ, "PTMLAB_HOME": str(home), "PTMLAB_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
    env.pop("PTMLAB_API_TOKEN", None)
    procs = []
    api_log = home / "api.log"
    with open(api_log, "wb") as out:
        procs.append(
            subprocess.Popen(
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
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
    with open(home / "worker.log", "wb") as out:
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "ptmlab.cli", "worker", "--lease-s", "3", "--poll-s", "0.2"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_http(f"{base}/healthz", procs[0], api_log)
        ids["home"] = home  # jobs' data may live there (the API accepts paths under PTMLAB_HOME)
        yield base, ids
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(dashboard):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser, dashboard, request):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.js_errors = errors
    failures_before = request.session.testsfailed
    yield pg
    if request.session.testsfailed > failures_before:  # what the page showed when the test failed
        shot(pg, f"FAILED-{request.node.name}")
    context.close()
    assert not errors, f"JavaScript errors: {errors}"


def shot(pg, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def brute_force_front(points: list[tuple], axis: int) -> set[int]:
    """Indices of SEED_COMPRESS rows no other row beats (cheaper-or-equal and at-least-as-good, one strictly)."""
    return {
        i
        for i, p in enumerate(points)
        if not any(q[axis] <= p[axis] and q[1] >= p[1] and (q[axis] < p[axis] or q[1] > p[1]) for q in points)
    }


def test_every_page_renders(page, dashboard):
    base, ids = dashboard
    jobs = ids["jobs"]
    visits = [
        ("/", "#recent-jobs tbody tr", "overview"),
        ("/jobs", "#jobs-table tbody tr", "jobs"),
        (f"/jobs/{jobs['failed']}", "#attempts tbody tr", "job-failed"),
        (f"/jobs/{jobs['pipeline_child']}", "#parents li", "job-pipeline-child"),
        ("/submit", "#group-fields select", "submit"),
        ("/leaderboard", "#leaderboard tbody tr", "leaderboard"),
        ("/compression", "#comp-chart .main-svg", "compression"),
        ("/probing", "#heatmap-chart .main-svg", "probing"),
        ("/compare", "#pick-table tbody tr", "compare-picker"),
        (f"/compare?runs={','.join(map(str, ids['results']['finetune'][:3]))}", "#config-table tbody tr", "compare"),
        (f"/runs/{ids['results']['probe'][0]}", "#layers-table tbody tr", "run"),
    ]
    for path, ready, name in visits:
        page.goto(base + path)
        page.wait_for_selector(ready)
        page.wait_for_load_state("networkidle")
        shot(page, name)
    assert page.locator("#layers-table tbody tr").count() == 5  # the probe's five layers (the last visit)
    page.goto(f"{base}/jobs/{jobs['failed']}")
    page.wait_for_selector("#job-error:not([hidden])")
    assert "fails on purpose" in page.inner_text("#job-error")
    assert page.is_visible("#retry-button") and not page.is_visible("#cancel-button")


def test_submit_a_job_from_the_form_and_watch_it_run(page, dashboard):
    base, _ = dashboard
    page.goto(f"{base}/submit")
    page.wait_for_selector("#f-stage option[value=sleep]", state="attached")
    page.select_option("#f-stage", "sleep")
    page.fill("#f-overrides", "stage.seconds=0.3")
    page.fill("#f-tags", "origin=browser")
    page.click("#submit-button")
    link = page.wait_for_selector("#submitted-job")
    job_id = int(link.inner_text().split()[-1])
    shot(page, "submit-done")
    page.goto(f"{base}/jobs")
    row = page.wait_for_selector(f'#jobs-table tr[data-job-id="{job_id}"]')
    assert "sleep" in row.inner_text()
    # The table follows the job live to its end (the worker runs it).
    page.wait_for_selector(f'#jobs-table tr[data-job-id="{job_id}"][data-status="succeeded"]')
    page.goto(f"{base}/jobs/{job_id}")
    page.wait_for_function("() => document.getElementById('log').textContent.includes('sleep:')")
    page.wait_for_selector("#job-results .job-result")
    shot(page, "job-succeeded")


def test_validation_errors_are_shown_next_to_their_field(page, dashboard):
    base, _ = dashboard
    page.goto(f"{base}/submit")
    page.wait_for_selector("#group-fields select[name=objective]")
    page.select_option("#f-stage", "pretrain")
    page.fill("#f-overrides", "trainer.no_such_key=1")
    page.click("#submit-button")
    error = page.wait_for_selector('.field[data-field="overrides"] .field-error:has-text("trainer.no_such_key")')
    assert "Could not override" in error.inner_text()
    # An impossible combination chosen in the group fields: the error sits under `objective`.
    page.fill("#f-overrides", "")
    page.select_option("#group-fields select[name=objective]", "clm")
    page.click("#submit-button")
    error = page.wait_for_selector('.field[data-field="objective"] .field-error:has-text("objective=clm")')
    assert "model family" in error.inner_text()
    assert page.inner_text('.field[data-field="overrides"] .field-error') == ""
    shot(page, "submit-validation-error")


def test_sweep_builder_previews_the_job_count(page, dashboard):
    base, _ = dashboard
    page.goto(f"{base}/submit")
    page.wait_for_selector("#f-stage option[value=sleep]", state="attached")
    page.select_option("#f-stage", "sleep")
    page.check("#f-sweep")
    page.fill("#f-overrides", "stage.seconds=0.1,0.2\nseed=range(0,3)")
    page.wait_for_selector("#sweep-count:has-text('6 jobs')")
    page.fill("#f-overrides", "stage.seconds=0.1,0.2,0.3,0.4\nseed=range(0,3)")
    page.wait_for_selector("#sweep-count:has-text('12 jobs')")
    assert "12 jobs" in page.inner_text("#submit-button")
    shot(page, "submit-sweep-preview")


def test_cancel_a_running_job(page, dashboard):
    base, _ = dashboard
    job = httpx.post(f"{base}/api/v1/jobs", json={"stage": "sleep", "overrides": ["stage.seconds=120"]}).json()
    deadline = time.monotonic() + 60
    while httpx.get(f"{base}/api/v1/jobs/{job['id']}").json()["status"] != "running":
        assert time.monotonic() < deadline, "the worker did not start the job"
        time.sleep(0.2)
    page.goto(f"{base}/jobs/{job['id']}")
    page.wait_for_selector("#job-status:has-text('running')")
    page.wait_for_function("() => document.getElementById('log').textContent.includes('sleeping')")
    page.click("#cancel-button")
    page.wait_for_selector("#job-status:has-text('cancelled')")
    assert page.is_visible("#retry-button") and not page.is_visible("#cancel-button")
    shot(page, "job-cancelled")


def _sst2_column(page) -> list[str]:
    return page.eval_on_selector_all(
        "#leaderboard tbody tr", "rows => rows.map(r => r.querySelector('td[data-task=sst2]')?.dataset.mean ?? '')"
    )


def test_leaderboard_sorts_and_opens_the_runs_behind_a_cell(page, dashboard):
    base, ids = dashboard
    page.goto(f"{base}/leaderboard")
    page.wait_for_selector("#leaderboard tbody tr")
    page.click("th[data-column='task:sst2']")
    configs = page.eval_on_selector_all("#leaderboard tbody tr", "rows => rows.map(r => r.dataset.config)")
    assert configs == [
        "electra_tiny / rtd / full",
        "bert_tiny / mlm / full",
        "bert_tiny / mlm / adapters",
        "gpt_tiny / clm / full",
    ]
    means = [float(v) for v in _sst2_column(page)]
    assert means == sorted(means, reverse=True) and means[0] == pytest.approx(86.0)
    page.click("th[data-column='task:sst2']")
    means = [float(v) for v in _sst2_column(page)]
    assert means == sorted(means)
    page.click("th[data-column='glue']")
    glue = page.eval_on_selector_all("#leaderboard tbody td.glue", "cells => cells.map(c => Number(c.dataset.glue))")
    assert glue == sorted(glue, reverse=True)
    assert page.locator("td.flagged").count() == 1  # the CoLA MCC = 0 run
    shot(page, "leaderboard-sorted")
    # a cell opens its runs side by side, named by their jobs
    board = httpx.get(f"{base}/api/v1/views/leaderboard").json()
    cell = next(r for r in board["rows"] if r["label"] == "bert_tiny / mlm / full")["cells"]["sst2"]
    jobs = [j for j in cell["job_ids"] if j is not None]
    assert cell["n"] == 2 and jobs
    page.click("tr[data-config='bert_tiny / mlm / full'] td[data-task=sst2]")
    page.wait_for_url(f"{base}/compare?jobs={','.join(map(str, jobs))}")
    page.wait_for_selector("#runs-table tbody tr")
    assert page.locator("#runs-table tbody tr").count() == len(jobs)


def test_compression_marks_exactly_the_pareto_front(page, dashboard):
    base, ids = dashboard
    page.goto(f"{base}/compression")
    page.wait_for_selector("#comp-chart .main-svg")
    # Size by default: on parameters an int8 copy sits exactly under its source.
    assert page.input_value("select[name=axis]") == "size_bytes"
    result_id = dict(enumerate(ids["results"]["compress"]))
    for axis_name, axis in (("params", 2), ("size_bytes", 3), ("latency_ms", 4)):
        page.select_option("select[name=axis]", axis_name)
        expected = {result_id[i] for i in brute_force_front(SEED_COMPRESS, axis)}
        drawn = page.evaluate("""() => document.getElementById('comp-chart').data
                                    .find(t => t.name === 'Pareto front').customdata""")
        assert set(drawn) == expected, axis_name
        marked = page.eval_on_selector_all(
            "#comp-table tr[data-pareto=true]", "rows => rows.map(r => Number(r.dataset.id))"
        )
        assert set(marked) == expected, axis_name
    names = page.evaluate("() => document.getElementById('comp-chart').data.map(t => t.name)")
    assert names == sorted({m for m, *_ in SEED_COMPRESS}) + ["Pareto front", "uncompressed source"]
    shot(page, "compression-latency")


def test_probing_draws_one_trace_per_model_and_task(page, dashboard):
    base, _ = dashboard
    page.goto(f"{base}/probing")
    page.wait_for_selector("#accuracy-chart .main-svg")
    names = page.evaluate("() => document.getElementById('accuracy-chart').data.map(t => t.name)")
    expected = {f"{m} · {t}" for m in SEED_PROBE_MODELS for t in SEED_PROBE_TASKS}
    assert len(names) == len(expected) and set(names) == expected
    assert page.evaluate("() => document.getElementById('selectivity-chart').data.length") == len(expected)
    # The structural probe's UUAS: one trace per model (only `structural` has it).
    assert page.evaluate("() => document.getElementById('uuas-chart').data.length") == len(SEED_PROBE_MODELS)
    page.uncheck("#model-boxes input[value='gpt_tiny']")
    assert page.evaluate("() => document.getElementById('accuracy-chart').data.length") == len(expected) - len(
        SEED_PROBE_TASKS
    )
    heat = page.evaluate("() => document.getElementById('heatmap-chart').data[0]")
    assert heat["type"] == "heatmap" and len(heat["z"]) == 4 and len(heat["z"][0]) == 4


def test_a_running_job_shows_live_progress_and_keeps_it_after_a_kill(page, dashboard):
    """A real (tiny) pretraining job: its progress bar advances and its loss curve gains points
    between two polls of the job page; the jobs table shows step/total and the loss; after it is
    killed (cancelled) mid-training its page still shows where it got to."""
    base, ids = dashboard
    corpus = Path(ids["home"]) / "corpus"
    corpus.mkdir(exist_ok=True)
    words = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox".split()
    (corpus / "doc.txt").write_text(
        "\n".join(" ".join(words[(i * 7 + j) % len(words)] for j in range(5 + i % 9)) for i in range(3000)) + "\n"
    )
    job = httpx.post(
        f"{base}/api/v1/jobs",
        json={
            "stage": "pretrain",
            "overrides": [
                "model=bert_tiny",
                "objective=mlm",
                "data=text_files",
                f"data.corpus.path={corpus}",
                "data.block_size=32",
                "data.batch_size=4",
                "tokenizer.vocab_size=90",
                "tokenizer.min_frequency=1",
                "trainer.max_steps=100000",
                "trainer.val_check_interval=25",
                "trainer.limit_val_batches=2",
                "trainer.log_every_n_steps=5",
                "trainer.enable_progress_bar=false",
                "checkpoint_every_n_steps=0",
            ],
        },
    ).json()
    assert "id" in job, job
    page.goto(f"{base}/jobs/{job['id']}")
    step_of = "() => Number(document.querySelector('#job-progress .progress-cell')?.dataset.step || 0)"
    points_of = (
        "() => [...document.querySelectorAll('#job-curves .small-chart')]"
        ".reduce((n, c) => n + (c.data || []).reduce((m, t) => m + t.x.length, 0), 0)"
    )
    page.wait_for_function(f"() => ({step_of})() > 0 && ({points_of})() > 0", timeout=180_000)
    step, points = page.evaluate(step_of), page.evaluate(points_of)
    page.wait_for_function(f"() => ({step_of})() > {step} && ({points_of})() > {points}", timeout=60_000)
    text = page.inner_text("#job-progress")
    assert "/100000" in text and "loss" in text and "ETA" in text, text
    assert "train/loss" in page.inner_text("#job-metrics")
    # One chart per metric (curves.js), grouped by prefix: the loss and the learning rate each on their own.
    charts = page.evaluate(
        "() => Object.fromEntries([...document.querySelectorAll('#job-curves .small-chart')]"
        ".map((c) => [c.dataset.metric, c.closest('.curve-group').dataset.group]))"
    )
    assert charts["train/loss"] == "train" and charts.get("lr", charts.get("train/lr")) == "train", charts
    # A pretraining's points carry their epoch, wall time and tokens seen: each is an x-axis.
    assert page.evaluate("() => [...document.querySelectorAll('#curve-x option')].map((o) => o.value)") == [
        "step",
        "epoch",
        "time_s",
        "tokens",
    ]
    axis_type = "() => document.querySelector(\"#job-curves .small-chart[data-metric='train/loss']\").layout.yaxis.type"
    assert page.evaluate(axis_type) == "linear"
    page.check("#curve-log")
    assert page.evaluate(axis_type) == "log"
    shot(page, "job-live-progress")
    # Every chart downloads as PNG and SVG (Plotly's own export).
    chart = "#job-curves .small-chart[data-metric='train/loss']"
    for title, suffix in (("Download plot as a PNG", ".png"), ("Download plot as SVG", ".svg")):
        page.hover(chart)
        with page.expect_download() as download:
            page.click(f"{chart} .modebar-btn[data-title='{title}']")
        assert download.value.suggested_filename == f"job-{job['id']}-train_loss{suffix}"

    page.goto(f"{base}/jobs")
    cell = page.wait_for_selector(f"tr[data-job-id='{job['id']}'] .progress-cell")
    assert "/100000" in cell.inner_text() and "loss" in cell.inner_text()
    shot(page, "jobs-progress-bars")

    httpx.post(f"{base}/api/v1/jobs/{job['id']}/cancel")
    deadline = time.monotonic() + 30
    while httpx.get(f"{base}/api/v1/jobs/{job['id']}").json()["status"] != "cancelled":
        assert time.monotonic() < deadline, "the job was not cancelled"
        time.sleep(0.3)
    last = httpx.get(f"{base}/api/v1/jobs/{job['id']}/progress").json()
    assert last["status"] == "cancelled" and last["progress"]["step"] > step and last["history"]
    page.goto(f"{base}/jobs/{job['id']}")
    page.wait_for_function(f"() => ({step_of})() >= {last['progress']['step']}")
    assert "loss" in page.inner_text("#job-progress") and "ETA" not in page.inner_text("#job-progress")


def test_two_rows_compared_over_seeds_match_scipy(page, dashboard):
    """Tick two leaderboard rows: per task the difference of means, its 95 % interval and the paired
    t-test's p-value (the same 3 seeds on each side) — the numbers scipy gives on the same seeds."""
    from scipy import stats
    from synthetic_results import _finetune

    from ptmlab.db import dispose_engines, session_scope
    from ptmlab.results import new_result

    base, ids = dashboard
    seeds = {"roberta_tiny": (0.861, 0.874, 0.859), "deberta_tiny": (0.830, 0.842, 0.825)}
    with session_scope(f"sqlite:///{Path(ids['home']) / 'ptmlab.db'}") as s:
        s.add_all(
            new_result(_finetune(model, "mlm", "full", "sst2", seed, {"accuracy": v}), tags={"suite": "seeds"})
            for model, values in seeds.items()
            for seed, v in enumerate(values, start=1)
        )
    dispose_engines()
    page.goto(f"{base}/leaderboard?tag=suite%3Dseeds")
    page.wait_for_selector("tr[data-config='roberta_tiny / mlm / full'] input.pick")
    page.check("tr[data-config='roberta_tiny / mlm / full'] input.pick")
    page.check("tr[data-config='deberta_tiny / mlm / full'] input.pick")
    row = page.wait_for_selector("#compare-table tr[data-task=sst2]")
    a, b = [100 * v for v in seeds["roberta_tiny"]], [100 * v for v in seeds["deberta_tiny"]]
    test = stats.ttest_rel(a, b)
    ci = test.confidence_interval(0.95)
    assert float(row.get_attribute("data-p")) == pytest.approx(test.pvalue, rel=1e-9)
    assert float(row.get_attribute("data-ci-low")) == pytest.approx(ci.low, rel=1e-9)
    assert float(row.get_attribute("data-ci-high")) == pytest.approx(ci.high, rel=1e-9)
    assert "paired t-test (n 3 vs 3" in row.inner_text() and f"[{ci.low:.2f}, {ci.high:.2f}]" in row.inner_text()
    shot(page, "leaderboard-compare")

    # Rows with fewer than 3 seeds: no interval, no p-value; the comparison says why.
    page.goto(f"{base}/leaderboard")
    page.wait_for_selector("tr[data-config='electra_tiny / rtd / full'] input.pick")
    page.check("tr[data-config='electra_tiny / rtd / full'] input.pick")
    page.check("tr[data-config='bert_tiny / mlm / full'] input.pick")
    warnings = page.wait_for_selector("#compare-warnings").inner_text()
    assert "n too small: 1 vs 2 seeds" in warnings
    row = page.wait_for_selector("#compare-table tr[data-task=sst2]")
    assert row.get_attribute("data-p") == "" and row.get_attribute("data-ci-low") == ""
    missing = httpx.get(f"{base}/api/v1/views/leaderboard/compare", params={"a": "nope", "b": "bert_tiny / mlm / full"})
    assert missing.status_code == 404 and "no leaderboard row 'nope'" in missing.json()["error"]["message"]


def test_the_pipeline_page_draws_the_dag_with_live_statuses(page, dashboard):
    base, _ = dashboard
    spec = {
        "name": "diamond",
        "jobs": [
            {"name": "prepare", "stage": "sleep", "overrides": ["stage.seconds=1.5"]},
            {"name": "left", "stage": "sleep", "depends_on": ["prepare"], "overrides": ["stage.seconds=0.2"]},
            {"name": "right", "stage": "sleep", "depends_on": ["prepare"], "overrides": ["stage.seconds=0.2"]},
            {"name": "join", "stage": "sleep", "depends_on": ["left", "right"], "overrides": ["stage.seconds=0.2"]},
        ],
    }
    pipeline = httpx.post(f"{base}/api/v1/pipelines", json={"spec": spec}).json()
    assert pipeline["count"] == 4, pipeline
    page.goto(f"{base}/pipelines/{pipeline['id']}")
    page.wait_for_selector("a.dag-node[data-name=join]")
    assert page.locator("a.dag-node").count() == 4 and page.locator("path.dag-edge").count() == 4
    edges = page.eval_on_selector_all("path.dag-edge", "ps => ps.map(p => p.dataset.from + '>' + p.dataset.to).sort()")
    assert edges == ["left>join", "prepare>left", "prepare>right", "right>join"]
    # columns by depth: prepare | left, right | join
    xs = {
        n: float(page.get_attribute(f"a.dag-node[data-name={n}] rect", "x"))
        for n in ("prepare", "left", "right", "join")
    }
    assert xs["prepare"] < xs["left"] == xs["right"] < xs["join"]
    page.wait_for_selector("a.dag-node[data-name=prepare][data-status=running]", timeout=60_000)
    assert page.get_attribute("a.dag-node[data-name=join]", "data-status") == "queued"
    page.wait_for_selector("a.dag-node[data-name=join][data-status=succeeded]", timeout=60_000)
    assert "4 succeeded" in page.inner_text("#pipeline-counts")
    shot(page, "pipeline-dag")
    job_id = page.get_attribute("a.dag-node[data-name=left]", "data-job-id")
    page.click("a.dag-node[data-name=left]")
    page.wait_for_url(f"{base}/jobs/{job_id}")
    assert page.wait_for_selector("#pipeline-link").get_attribute("href") == f"/pipelines/{pipeline['id']}"


def test_probe_drift_overlays_a_lineage_with_its_differences(page, dashboard):
    """pretrain -> finetune -> compress, each probed: choosing the pretrained model overlays the
    three UPOS curves and draws each descendant's difference per layer."""
    from ptmlab.db import SUCCEEDED, dispose_engines, session_scope
    from ptmlab.db.models import Job
    from ptmlab.queue import submit_job
    from ptmlab.results import new_result

    base, ids = dashboard
    curves = {
        "pretrained": [0.62, 0.81, 0.86, 0.84],
        "fine-tuned": [0.62, 0.80, 0.83, 0.76],
        "compressed": [0.61, 0.78, 0.79, 0.70],
    }
    with session_scope(f"sqlite:///{Path(ids['home']) / 'ptmlab.db'}") as s:

        def done(**spec):
            job = submit_job(s, queue="lineage", **spec)
            s.get(Job, job.id).status = SUCCEEDED
            s.commit()
            return job.id

        models = {"pretrained": done(stage="pretrain", name="drift-pretrain")}
        models["fine-tuned"] = done(stage="finetune", name="drift-finetune", depends_on=[models["pretrained"]])
        models["compressed"] = done(stage="compress", name="drift-compress", depends_on=[models["fine-tuned"]])
        for label, job_id in models.items():
            probe = done(stage="probe", name=f"drift-probe-{label}", depends_on=[job_id])
            s.add(
                new_result(
                    {
                        "stage": "probe",
                        "model": f"drift {label}",
                        "probe_task": "upos",
                        "tasks": [
                            {
                                "probe_task": "upos",
                                "family": "token",
                                "metric": "accuracy",
                                "layers": [
                                    {"layer": i, "accuracy": v, "control_accuracy": 0.5}
                                    for i, v in enumerate(curves[label])
                                ],
                            }
                        ],
                    },
                    job_id=probe,
                )
            )
        s.commit()
    dispose_engines()
    page.goto(f"{base}/probing/drift")
    page.wait_for_selector(f"#drift-source option[value='{models['pretrained']}']", state="attached")
    page.select_option("#drift-source", str(models["pretrained"]))
    page.wait_for_function("() => (document.getElementById('drift-chart').data || []).length === 3")
    traces = page.evaluate("() => document.getElementById('drift-chart').data.map(t => [t.name, t.y])")
    assert [y for _, y in traces] == [curves["pretrained"], curves["fine-tuned"], curves["compressed"]]
    diffs = page.evaluate("() => document.getElementById('drift-diff').data.map(t => t.y)")
    expected = [
        [round(a - b, 6) for a, b in zip(curves[k], curves["pretrained"])] for k in ("fine-tuned", "compressed")
    ]
    assert [[round(v, 6) for v in d] for d in diffs] == expected
    assert "(-0.140)" in page.inner_text(f"#drift-table tr[data-job-id='{models['compressed']}']")
    shot(page, "probe-drift")


def _footprint_column(page, key: str) -> dict[str, str]:
    return dict(
        page.eval_on_selector_all(
            "#leaderboard tbody tr",
            f"rows => rows.map(r => [r.dataset.config, r.querySelector('td[data-footprint={key}]').textContent])",
        )
    )


def test_leaderboard_shows_each_modes_footprint_and_filters_by_mode(page, dashboard):
    """MiniLM under four adaptation modes: trainable parameters, their share and the delta size
    sit beside the scores; ticking modes keeps only their rows; older runs show "—"."""
    from synthetic_results import SEED_ADAPTATION_FOOTPRINTS, seed_adaptation_results

    from ptmlab.db import dispose_engines, session_scope

    base, ids = dashboard
    with session_scope(f"sqlite:///{Path(ids['home']) / 'ptmlab.db'}") as s:
        seed_adaptation_results(s)
    dispose_engines()
    page.goto(f"{base}/leaderboard?tag=suite%3Dadaptation")
    page.wait_for_selector("tr[data-config='minilm / hf / lora']")
    headers = page.eval_on_selector_all("#leaderboard thead th", "ths => ths.map(t => t.dataset.column || '')")
    # the footprint columns follow the scores: SST-2, RTE, the GLUE average, then trainable, %, delta
    assert headers[-6:] == [
        "task:sst2",
        "task:rte",
        "glue",
        "fp:trainable_params",
        "fp:trainable_pct",
        "fp:delta_bytes",
    ]
    assert _footprint_column(page, "trainable_params") == {
        "minilm / hf / full": "22.7M",
        "minilm / hf / lora": "74.5k",
        "minilm / hf / bitfit": "26.9k",
        "minilm / hf / prompt_tuning": "8.4k",
    }
    assert _footprint_column(page, "trainable_pct") == {
        "minilm / hf / full": "100.0%",
        "minilm / hf / lora": "0.33%",
        "minilm / hf / bitfit": "0.12%",
        "minilm / hf / prompt_tuning": "0.037%",
    }
    delta = _footprint_column(page, "delta_bytes")
    assert delta["minilm / hf / full"] == "86.6 MiB" and delta["minilm / hf / lora"] == "291.0 KiB"
    raw = page.get_attribute("tr[data-config='minilm / hf / lora'] td[data-footprint=delta_bytes]", "data-value")
    assert float(raw) == SEED_ADAPTATION_FOOTPRINTS["lora"]["delta_bytes"]
    page.click("th[data-column='fp:trainable_params']")  # sorts by cost, largest first
    configs = page.eval_on_selector_all("#leaderboard tbody tr", "rows => rows.map(r => r.dataset.config)")
    assert configs == [f"minilm / hf / {m}" for m in ("full", "lora", "bitfit", "prompt_tuning")]
    shot(page, "leaderboard-adaptation-modes")

    page.check("#mode-boxes input[value=lora]")
    page.wait_for_function("() => document.querySelectorAll('#leaderboard tbody tr').length === 1")
    page.check("#mode-boxes input[value=bitfit]")
    page.wait_for_function("() => document.querySelectorAll('#leaderboard tbody tr').length === 2")
    configs = page.eval_on_selector_all("#leaderboard tbody tr", "rows => rows.map(r => r.dataset.config)")
    assert sorted(configs) == ["minilm / hf / bitfit", "minilm / hf / lora"]
    assert "adaptation=bitfit%2Clora" in page.url and "adaptation=bitfit%2Clora" in page.get_attribute(
        "#export-csv", "href"
    )
    assert page.locator("#mode-boxes input").count() == len(SEED_ADAPTATION_FOOTPRINTS)  # the others stay offered
    shot(page, "leaderboard-mode-filter")
    page.reload()  # the filter is in the URL
    page.wait_for_selector("#mode-boxes input[value=lora]:checked")
    assert page.locator("#leaderboard tbody tr").count() == 2

    # Runs from before the footprint was recorded: "—", and the mode filter spans every tag.
    page.goto(f"{base}/leaderboard?adaptation=adapters")
    page.wait_for_selector("tr[data-config='bert_tiny / mlm / adapters']")
    assert page.locator("#leaderboard tbody tr").count() == 1
    assert page.inner_text("tr[data-config='bert_tiny / mlm / adapters'] td[data-footprint=delta_bytes]") == "—"
    assert page.inner_text("tr[data-config='bert_tiny / mlm / adapters'] td[data-footprint=trainable_pct]") == "1.0%"


def _no_external_requests(page) -> list[str]:
    """Abort every request that leaves the machine and record it: the dashboard must work offline."""
    external: list[str] = []

    def route(r):
        if r.request.url.startswith(("http://127.0.0.1", "data:", "blob:")):
            return r.continue_()
        external.append(r.request.url)
        return r.abort()

    page.route("**/*", route)
    return external


def test_sweep_and_pipeline_lists_and_the_sweep_page(page, dashboard):
    base, _ = dashboard
    # On a queue no worker serves: the lists show them queued, their counts exact.
    sweep = httpx.post(
        f"{base}/api/v1/sweeps",
        json={
            "name": "sleep_grid",
            "queue": "parked",
            "overrides": ["stage=sleep", "stage.seconds=0.1,0.2,0.3", "seed=1,2"],
        },
    ).json()
    spec = {
        "name": "parked_pair",
        "defaults": {"queue": "parked"},
        "jobs": [{"name": "a", "stage": "sleep"}, {"name": "b", "stage": "sleep", "depends_on": ["a"]}],
    }
    pipeline = httpx.post(f"{base}/api/v1/pipelines", json={"spec": spec}).json()
    listed = {g["id"]: g for g in httpx.get(f"{base}/api/v1/sweeps").json()["items"]}
    assert listed[sweep["id"]]["name"] == "sleep_grid" and listed[sweep["id"]]["counts"]["queued"] == 6
    assert listed[sweep["id"]]["status"] == "queued" and listed[sweep["id"]]["finished"] == 0

    page.goto(f"{base}/sweeps")
    row = page.locator(f"#groups-table tr[data-id='{sweep['id']}']")
    assert "sleep_grid" in row.inner_text() and "6 queued" in row.inner_text() and "0/6" in row.inner_text()
    shot(page, "sweeps")
    row.locator("a", has_text="sleep_grid").click()
    page.wait_for_url(f"{base}/sweeps/{sweep['id']}")
    # The columns are what the sweep varies: seed and stage.seconds, one row per job.
    heads = page.eval_on_selector_all("#sweep-jobs thead th", "ths => ths.map(t => t.textContent)")
    assert heads == ["job", "status", "seed", "stage.seconds", "score"]
    assert page.locator("#sweep-jobs tbody tr").count() == 6
    assert "6 queued" in page.inner_text("#sweep-summary")
    shot(page, "sweep")

    page.goto(f"{base}/pipelines")
    row = page.locator(f"#groups-table tr[data-id='{pipeline['id']}']")
    assert "parked_pair" in row.inner_text() and "2 queued" in row.inner_text()
    row.locator("a", has_text="parked_pair").click()
    page.wait_for_url(f"{base}/pipelines/{pipeline['id']}")
    page.wait_for_selector("a.dag-node[data-name=b]")
    # Both lists are in the navigation, and each page is marked where it is.
    assert page.get_attribute("nav a[href='/pipelines']", "aria-current") == "page"
    for job_id in sweep["job_ids"] + [j["job_id"] for j in pipeline["jobs"]]:
        httpx.post(f"{base}/api/v1/jobs/{job_id}/cancel")


def test_the_study_page_draws_its_trials_history_parameters_and_pruned_curves(page, dashboard):
    base, ids = dashboard
    view = httpx.get(
        f"{base}/api/v1/views/studies/{ids['study']}", timeout=30
    ).json()  # the first importances import scipy
    pruned = [t["number"] for t in view["trials"] if t["state"] == "pruned"]
    complete = [t["number"] for t in view["trials"] if t["state"] == "complete"]
    best_job = next(t["job_id"] for t in view["trials"] if t["number"] == view["best"])
    page.goto(f"{base}/studies")
    row = page.locator(f"#studies-table tr[data-id='{ids['study']}']")
    assert "finished" in row.inner_text() and f"{len(pruned)} pruned" in row.inner_text()
    row.locator("a", has_text="by_hand").click()
    page.wait_for_url(f"{base}/studies/{ids['study']}")
    page.wait_for_selector("#study[data-loaded=true]")
    page.wait_for_selector("#importance-chart .main-svg")
    assert page.get_attribute("nav a[href='/studies']", "aria-current") == "page"
    states = page.eval_on_selector_all("#study-trials tbody tr", "trs => trs.map(t => t.dataset.state)")
    assert states == [t["state"] for t in view["trials"]]
    assert page.get_attribute("#study-trials tr.best-row", "data-number") == str(view["best"])
    assert page.get_attribute("#study-best", "href") == f"/jobs/{best_job}"
    # The intermediate curves: one per trial, the pruned ones dashed and shorter than the survivors'.
    curves = page.evaluate("""() => document.getElementById('curves-chart').data.map(
        t => ({name: t.name, dash: t.line.dash, n: t.x.length}))""")
    dashed = [c for c in curves if c["dash"] == "dash"]
    assert [c["name"] for c in dashed] == [f"trial {n} (pruned)" for n in pruned]
    assert max(c["n"] for c in dashed) < min(c["n"] for c in curves if c["dash"] == "solid") == 4
    history = page.evaluate("() => document.getElementById('history-chart').data.map(t => t.x.length)")
    assert history == [len(complete), len(complete)]
    assert page.locator("#scatter-charts .scatter-chart.js-plotly-plot").count() == 2  # one per searched key
    assert page.locator("#parcoords-chart .main-svg").count() >= 1
    shot(page, "study")


def test_api_docs_favicon_and_not_found_pages_work_offline(page, dashboard):
    base, ids = dashboard
    external = _no_external_requests(page)
    failed: list[str] = []
    page.on("requestfailed", lambda r: failed.append(r.url))
    page.goto(f"{base}/docs")
    page.wait_for_selector(".opblock-summary-path")  # Swagger UI drew the operations
    paths = page.eval_on_selector_all(".opblock-summary-path", "els => els.map(e => e.textContent.trim())")
    assert "/api/v1/jobs" in paths and "/api/v1/sweeps" in paths and "/api/v1/pipelines" in paths
    page.goto(f"{base}/redoc")
    page.wait_for_selector("h2:has-text('Validate (compose the config) and queue one job')", state="attached")  # ReDoc
    assert not external and not failed, (external, failed)
    assert httpx.get(f"{base}/favicon.ico").status_code == 200

    for path in (
        "/no/such/page",
        f"/runs/{10**6}",
        f"/jobs/{10**6}",
        "/sweeps/nosuchsweep",
        "/pipelines/nosuchpipe",
        "/studies/nosuchstudy",
    ):
        response = page.goto(base + path)
        assert response.status == 404, path
        assert page.inner_text("h1") == "Not found" and page.locator("nav a").count() >= 8, path
    # The API's own clients still get JSON.
    assert httpx.get(f"{base}/no/such/page").json()["error"]["code"] == "not_found"


def test_compress_probe_and_ended_job_pages_show_their_results_and_final_state(page, dashboard):
    base, ids = dashboard
    from synthetic_results import probe_summary

    from ptmlab.db import dispose_engines, session_scope
    from ptmlab.db.models import FAILED, SUCCEEDED, Job
    from ptmlab.results import new_result

    url = f"sqlite:///{ids['home'] / 'ptmlab.db'}"
    stale = {"step": 0, "phase": "measuring the source…", "eta_s": 290.0, "steps_per_s": 1.5, "updated_at": 1.0}
    compress = {
        "stage": "compress",
        "seed": 1,
        "wall_time_s": 3.0,
        "method": "quantize_dynamic",
        "source": "job:1",
        "task": "sst2",
        "main_metric": "accuracy",
        "score": 0.871,
        "source_score": 0.8807,
        "retention": 0.989,
        "params": 4_400_000,
        "size_bytes": 4_600_000,
        "source_params": 4_400_000,
        "source_size_bytes": 17_600_000,
        "latency_ms": 4.5,
        "source_latency_ms": 9.0,
        "config": {"dtype": "qint8"},
    }
    import random

    probe = probe_summary(random.Random(3), "bert_tiny", "pos", seed=1)
    with session_scope(url) as s:
        made = {}
        for label, stage, summary, status, error in (
            ("compress", "compress", compress, SUCCEEDED, None),
            ("probe", "probe", probe, SUCCEEDED, None),
            ("bare_fail", "sleep", None, FAILED, "exit code 1"),
        ):
            job = Job(
                stage=stage,
                overrides=[],
                status=status,
                progress=stale,
                error=error,
                exit_code=0 if status == SUCCEEDED else 1,
                queue="parked",
            )
            s.add(job)
            s.flush()
            if summary is not None:
                s.add(new_result(summary, job_id=job.id))
            made[label] = job.id
        s.commit()
    dispose_engines()

    page.goto(f"{base}/jobs/{made['compress']}")
    digest = page.wait_for_selector(".result-digest")
    text = digest.inner_text()
    assert (
        "0.8710" in text and "source 0.8807" in text and "4.4 MiB" in text and "4,600,000" not in text
    )  # sizes in MiB, never raw bytes
    assert "0.261× the source's size" in text and "0.5× the source's latency" in text
    progress = page.inner_text("#job-progress-section")
    for stale_text in ("measuring", "left", "steps/s", "step 0", "ETA"):
        assert stale_text not in progress, (stale_text, progress)
    shot(page, "job-compress")

    page.goto(f"{base}/jobs/{made['probe']}")
    page.wait_for_selector(".probe-chart .main-svg")
    scores = page.eval_on_selector_all(
        ".probe-layers tbody tr td:nth-child(2)", "tds => tds.map(t => Number(t.textContent))"
    )
    assert scores == [layer["accuracy"] for layer in probe["layers"]]
    controls = page.eval_on_selector_all(
        ".probe-layers tbody tr td:nth-child(3)", "tds => tds.map(t => Number(t.textContent))"
    )
    assert controls == [layer["control_accuracy"] for layer in probe["layers"]]
    shot(page, "job-probe")

    page.goto(f"{base}/jobs/{made['bare_fail']}")
    page.wait_for_selector("#job-error:not([hidden])")
    assert page.inner_text("#job-error").strip() == "exit code 1"  # once, not "exit code 1: exit code 1"


def test_a_board_without_glue_tasks_opens_sorted_by_a_task(page, dashboard):
    """SentEval-only rows have no GLUE average ("–" in every row): sorting by it would order
    nothing, so the board opens sorted by the task most rows have, best first."""
    from synthetic_results import _finetune

    from ptmlab.db import dispose_engines, session_scope
    from ptmlab.results import new_result

    base, ids = dashboard
    accuracies = {"bert_tiny": 0.71, "gpt_tiny": 0.64, "electra_tiny": 0.77}
    with session_scope(f"sqlite:///{Path(ids['home']) / 'ptmlab.db'}") as s:
        s.add_all(
            [
                new_result(_finetune(model, "mlm", "full", "mr", 1, {"accuracy": acc}), tags={"suite": "senteval"})
                for model, acc in accuracies.items()
            ]
        )
        s.commit()
    dispose_engines()
    page.goto(f"{base}/leaderboard?tag=suite%3Dsenteval")
    page.wait_for_selector("#leaderboard tbody tr")
    # no GLUE task, no "GLUE avg" column reading "–" on every row; the title names the task shown
    assert page.locator("#leaderboard td.glue, #leaderboard th[data-column=glue]").count() == 0
    assert page.inner_text("h1").startswith("Leaderboard: ") and "GLUE" not in page.inner_text("h1")
    assert page.get_attribute("#leaderboard thead th.sorted", "data-column") == "task:mr"
    means = page.eval_on_selector_all(
        "#leaderboard tbody td[data-task=mr]", "cells => cells.map(c => Number(c.dataset.mean))"
    )
    assert means == sorted(means, reverse=True) and len(means) == 3, means

    # SuperGLUE rows: on the GLUE board extra columns without an average (no average column); the
    # benchmark selector switches to SuperGLUE's board, its average column, sorted by it, kept in the URL.
    with session_scope(f"sqlite:///{Path(ids['home']) / 'ptmlab.db'}") as s:
        s.add_all(
            [
                new_result(
                    _finetune(model, "mlm", "full", task, 1, {"accuracy": acc + delta}), tags={"suite": "superglue"}
                )
                for model, acc in accuracies.items()
                for task, delta in (("boolq", 0.0), ("wic", -0.1))
            ]
        )
        s.commit()
    dispose_engines()
    page.goto(f"{base}/leaderboard?tag=suite%3Dsuperglue")
    page.wait_for_selector("#leaderboard tbody tr")
    assert page.locator("#leaderboard thead th[data-column=glue]").count() == 0
    assert page.get_attribute("#leaderboard thead th.sorted", "data-column").startswith("task:")
    page.select_option("#lb-filters select[name=benchmark]", "superglue")
    page.wait_for_selector("#leaderboard thead th.sorted[data-column=glue]")
    assert page.inner_text("#leaderboard thead th[data-column=glue]").startswith("SuperGLUE avg")
    averages = page.eval_on_selector_all(
        "#leaderboard tbody td.glue", "cells => cells.map(c => Number(c.dataset.glue))"
    )
    assert averages == pytest.approx([72.0, 66.0, 59.0]), averages  # (acc + acc - 10) / 2, best first
    assert "benchmark=superglue" in page.url
    page.reload()
    page.wait_for_selector("#leaderboard thead th.sorted[data-column=glue]")
    assert page.input_value("#lb-filters select[name=benchmark]") == "superglue"


def test_runs_table_columns_sort_filter_search_and_compare(browser, dashboard):
    """At 1,280 px: add a metric column and sort by it, filter, search, tick two runs and open
    them side by side; the state lives in the URL."""
    base, ids = dashboard
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{base}/runs")
    page.wait_for_selector("#runs-table tbody tr")
    page.fill("#runs-controls input[name=add]", "metrics.accuracy")
    page.press("#runs-controls input[name=add]", "Enter")
    page.wait_for_selector("#runs-table th[data-column='metrics.accuracy']")
    page.click("#runs-table th[data-column='metrics.accuracy']")
    page.wait_for_selector("#runs-table th.sorted[data-column='metrics.accuracy']")
    values = page.eval_on_selector_all(
        "#runs-table tbody tr",
        """rows => rows.map(r =>
        r.querySelector('td:nth-child(' + (1 + [...r.closest('table').querySelectorAll('thead th')]
        .findIndex(th => th.dataset.column === 'metrics.accuracy')) + ')').dataset.value ?? null)""",
    )
    numbers = [float(v) for v in values if v is not None]
    with_accuracy = sum("accuracy" in m for *_, m in SEED_FINETUNE)
    assert len(numbers) >= with_accuracy and numbers == sorted(numbers, reverse=True), values  # best first
    assert values[: len(numbers)] == [v for v in values if v is not None]  # runs without one after them
    assert "sort=metrics.accuracy" in page.url and "columns=" in page.url
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280  # no sideways scroll

    matching = httpx.get(
        f"{base}/api/v1/views/runs",
        params=[("filter", "task=sst2"), ("filter", "metrics.accuracy>=0.8"), ("column", "task"), ("limit", 500)],
    ).json()
    assert matching["total"] >= 3 and {r["values"]["task"] for r in matching["rows"]} == {"sst2"}
    page.fill("#runs-controls input[name=filter]", "task=sst2; metrics.accuracy>=0.8")
    page.press("#runs-controls input[name=filter]", "Enter")
    rows = "() => document.querySelectorAll('#runs-table tbody tr').length"
    page.wait_for_function(f"() => ({rows})() === {matching['total']}")
    page.fill("#runs-controls input[name=q]", "electra")  # the one ELECTRA run among them
    page.wait_for_function(f"() => ({rows})() === 1")
    assert "electra_tiny" in page.inner_text("#runs-table tbody tr")
    page.fill("#runs-controls input[name=q]", "")
    page.wait_for_function(f"() => ({rows})() === {matching['total']}")
    shot(page, "runs-table")
    # a run is picked by its job (j<id>), a result recorded without a job by its own id (r<id>)
    picked = page.eval_on_selector_all("#runs-table tbody tr", "rows => rows.slice(0, 2).map(r => r.dataset.id)")
    for pick in picked:
        page.check(f"#runs-table tr[data-id='{pick}'] input.pick")
    page.click("#compare-selected")
    jobs = sorted(int(p[1:]) for p in picked if p.startswith("j"))
    hand = sorted(int(p[1:]) for p in picked if p.startswith("r"))
    expected = "&".join(
        x
        for x in (
            f"jobs={','.join(map(str, jobs))}" if jobs else "",
            f"runs={','.join(map(str, hand))}" if hand else "",
        )
        if x
    )
    page.wait_for_url(f"{base}/compare?{expected}")
    page.wait_for_selector("#answer-table tbody tr")  # the two runs side by side
    assert page.locator("#runs-section #runs-table tbody tr").count() == 2
    context.close()
    assert not errors, errors


def test_compare_draws_every_curve_validation_first_with_legends(page, dashboard):
    """Two runs with 18 curves in a real MLflow store (the one the API reads) and a one-point
    measurement: every curve is drawn (no cap), validation first, each chart with its legend, and
    the one-point number sits in a table, not a chart."""
    from mlflow.entities import Metric
    from synthetic_results import _finetune

    from ptmlab.db import dispose_engines, session_scope
    from ptmlab.results import new_result
    from ptmlab.settings import Settings
    from ptmlab.tracking import mlflow_client

    base, ids = dashboard
    home = Path(ids["home"])
    client = mlflow_client(Settings(home=home).resolved_tracking_uri)
    experiment = client.create_experiment(f"compare-{time.time_ns()}")
    curve_keys = ["val/accuracy", "val/loss", "train/loss", *[f"train/extra_{i:02d}" for i in range(15)]]
    result_ids = []
    with session_scope(f"sqlite:///{home / 'ptmlab.db'}") as s:
        for r in range(2):
            run = client.create_run(experiment).info.run_id
            now = int(time.time() * 1000)
            client.log_batch(
                run,
                metrics=[Metric(k, 0.1 * r + step / 10, now, step) for k in curve_keys for step in range(5)]
                + [Metric("compress/size_bytes", 526_465_000_000 + r, now, 0)],
            )
            row = new_result(
                {**_finetune("bert_tiny", "mlm", "full", "sst2", r, {"accuracy": 0.8}), "mlflow_run_id": run}
            )
            s.add(row)
            s.flush()
            result_ids.append(row.id)
        s.commit()
    dispose_engines()
    page.goto(f"{base}/compare?runs={','.join(map(str, result_ids))}")
    page.wait_for_selector("#curves .small-chart .main-svg")
    charts = "() => [...document.querySelectorAll('#curves .small-chart')].map(d => d.dataset.metric)"
    page.wait_for_function(
        f"() => document.querySelectorAll('#curves .small-chart.js-plotly-plot').length === {len(curve_keys)}"
    )
    drawn = page.evaluate(charts)
    assert drawn[:2] == ["val/accuracy", "val/loss"] and sorted(drawn) == sorted(curve_keys), drawn
    legends = page.evaluate(
        "() => [...document.querySelectorAll('#curves .small-chart')].map(d => d.layout.showlegend)"
    )
    assert all(legends) and page.locator("#curves .small-chart .legend").count() == len(curve_keys)
    single = page.locator("#single-metrics tr[data-metric='compress/size_bytes'] td.num")
    assert single.count() == 2 and "–" not in single.all_inner_texts(), single.all_inner_texts()  # both runs' values
    assert page.locator("#single-metrics .main-svg").count() == 0  # numbers, not a chart
    assert page.locator("#curves .small-chart[data-metric='compress/size_bytes']").count() == 0
    shot(page, "compare-curves")


def test_name_tags_and_note_edited_on_the_job_page_show_in_the_lists(page, dashboard):
    base, _ = dashboard
    job = httpx.post(
        f"{base}/api/v1/jobs",
        json={"stage": "sleep", "overrides": ["stage.seconds=0.1"], "queue": "parked", "tags": {"origin": "form"}},
    ).json()
    page.goto(f"{base}/jobs/{job['id']}")
    if not page.evaluate("document.getElementById('job-labels').open"):  # open when the job has tags or a note
        page.click("#job-labels summary")
    page.fill("#label-form input[name=name]", "warmup-ablation")
    page.fill("#label-form input[name=tags]", "idea=warmup")  # origin=form left out: removed
    page.fill("#label-form textarea[name=note]", "diverged after epoch 2")
    page.click("#label-save")
    page.wait_for_selector("#label-tags code:has-text('idea=warmup')")
    stored = httpx.get(f"{base}/api/v1/jobs/{job['id']}").json()
    assert (stored["name"], stored["tags"], stored["note"]) == (
        "warmup-ablation",
        {"idea": "warmup"},
        "diverged after epoch 2",
    )
    page.goto(f"{base}/jobs?queue=parked")
    row = page.wait_for_selector(f"#jobs-table tr[data-job-id='{job['id']}']")
    assert "warmup-ablation" in row.inner_text() and "idea=warmup" in row.inner_text()
    page.goto(f"{base}/jobs/{job['id']}")  # the page opens with what was saved
    assert page.input_value("#label-form input[name=name]") == "warmup-ablation"
    assert page.input_value("#label-form textarea[name=note]") == "diverged after epoch 2"
    httpx.post(f"{base}/api/v1/jobs/{job['id']}/cancel")


def test_every_page_loads_without_a_console_error_or_a_failed_request(browser, dashboard):
    """Every page of the navigation and every kind of detail page, offline: no console error, no
    request that fails or answers 4xx/5xx, no request leaving the machine."""
    base, ids = dashboard
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    external = _no_external_requests(page)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("requestfailed", lambda r: problems.append(f"failed: {r.url} {r.failure}"))
    page.on("response", lambda r: problems.append(f"{r.status}: {r.url}") if r.status >= 400 else None)
    sweep = httpx.post(
        f"{base}/api/v1/sweeps",
        json={"name": "pages", "queue": "parked", "overrides": ["stage=sleep", "stage.seconds=0.1,0.2"]},
    ).json()
    jobs, results = ids["jobs"], ids["results"]
    paths = [
        "/",
        "/jobs",
        "/runs",
        "/sweeps",
        f"/sweeps/{sweep['id']}",
        "/pipelines",
        "/submit",
        "/leaderboard",
        "/compression",
        "/robustness",
        "/probing",
        "/probing/drift",
        "/compare",
        f"/compare?runs={results['finetune'][0]}",
        f"/runs/{results['probe'][0]}",
        f"/jobs/{jobs['failed']}",
        f"/jobs/{jobs['succeeded']}",
        f"/jobs/{jobs['pipeline_child']}",
        "/studies",
        f"/studies/{ids['study']}",
        "/docs",
        "/redoc",
    ]
    for path in paths:
        if path in ("/docs", "/redoc"):
            # Their script asks for the schema once it has run: on a loaded machine "networkidle"
            # can come before that request starts, and the next page's load aborted it.
            with page.expect_response(lambda r: r.url.endswith("/openapi.json")):
                page.goto(base + path, wait_until="networkidle")
        else:
            page.goto(base + path, wait_until="networkidle")
    context.close()
    for job_id in sweep["job_ids"]:
        httpx.post(f"{base}/api/v1/jobs/{job_id}/cancel")
    assert not problems and not external, (problems, external)

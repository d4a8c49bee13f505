"""The dashboard's chart component (web/static/js/curves.js) in a real browser, on the job page (a
job's progress history as the worker stores it) and on the compare and run pages (two runs' metric
history in a real MLflow store): one chart per metric grouped by prefix, the x-axis switched
between step, epoch, wall time and tokens seen, log scale and smoothing toggled, the settings kept
in the URL, PNG and SVG downloads; the drawn traces read back from Plotly's divs. No worker runs
and nothing trains: the test writes the rows a finished job leaves."""

from __future__ import annotations

import math
import time

import pytest
from test_dashboard_browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    WAIT_MS,
    _no_external_requests,
    require_chromium,
    served_home,
    shot,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

POINTS = 60


def _history(series: str, scale: float) -> list[dict]:
    """A job's progress history: every point at its step, fractional epoch, seconds and tokens."""
    out = []
    for i in range(POINTS):
        point = {
            "step": 10 * i,
            "series": series,
            "epoch": round(i / 20, 4),
            "time_s": 5.0 * i,
            "tokens": 1000 * i,
            "train/loss": scale * (2.0 / (1 + i) + 0.3 * ((-1) ** i) + 0.5),
            "lr": 1e-4 * (1 - i / POINTS) + 1e-6,
            "train/samples_per_s": 120.0 + i,
        }
        if i % 10 == 9:
            point["val/accuracy"] = 0.0 if i == 9 else 0.5 + i / 200
        out.append(point)
    return out


def tensorboard_ema(values: list[float], weight: float) -> list[float]:
    """TensorBoard's debiased exponential moving average, by hand."""
    last, out = 0.0, []
    for n, v in enumerate(values, start=1):
        last = last * weight + (1 - weight) * v
        out.append(last / (1 - weight**n))
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(base URL, job id, two result ids with MLflow history) on a fresh home, `ptmlab serve` only."""
    require_chromium()
    from mlflow.entities import Metric
    from synthetic_results import _finetune

    from ptmlab.db import SUCCEEDED, dispose_engines, migrate, session_scope
    from ptmlab.queue import submit_job
    from ptmlab.results import new_result
    from ptmlab.settings import Settings
    from ptmlab.tracking import mlflow_client

    home = tmp_path_factory.mktemp("curves_home")
    url = f"sqlite:///{home / 'ptmlab.db'}"
    migrate(url)
    # This home's own store, as the API below (started without MLFLOW_TRACKING_URI) reads it: a test
    # earlier in the session can leave MLFLOW_TRACKING_URI set in this process (MLflow's
    # set_tracking_uri exports it), and the runs then went to that store instead.
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        tracking_uri = Settings(home=home).resolved_tracking_uri
    client = mlflow_client(tracking_uri)
    experiment = client.create_experiment("curves")
    result_ids = []
    with session_scope(url) as s:
        job = submit_job(s, stage="sleep", overrides=["stage.seconds=0.1"], queue="parked", name="curves")
        history = _history("training", 1.0) + _history("control", 1.2)
        job.status, job.attempts = SUCCEEDED, 1
        job.progress = {
            "phase": "finishing",
            "step": 590,
            "total_steps": 590,
            "epoch": 2,
            "metrics": {},
            "history": history,
        }
        # A job with 35 metrics: the sections past the first 24 charts start collapsed.
        many = submit_job(s, stage="sleep", overrides=["stage.seconds=0.1"], queue="parked", name="many")
        many.progress = {
            "phase": "finishing",
            "step": 4,
            "metrics": {},
            "history": [
                {
                    "step": step,
                    **{
                        f"{g}/m{i:02d}": step + i
                        for g, n in (("val", 10), ("train", 20), ("zeta", 5))
                        for i in range(n)
                    },
                }
                for step in range(5)
            ],
        }
        for r in range(2):
            run = client.create_run(experiment).info.run_id
            t0 = int(time.time() * 1000)
            metrics = []
            for step in range(10):
                at = t0 + 30_000 * step  # 30 s a step: the wall-time axis in minutes
                metrics += [
                    Metric("train/loss", (1 + r) * (3.0 / (1 + step) + 0.4 * ((-1) ** step) + 0.5), at, step),
                    Metric("epoch", step // 5, at, step),
                    Metric("train/tokens_seen", 4096 * (step + 1), at, step),
                ]
                if step % 3 == 2:
                    metrics.append(Metric("val/accuracy", 0.5 + 0.03 * step + 0.01 * r, at, step))
            metrics.append(Metric("compress/size_bytes", 526_465_000_000 + r, t0, 0))
            client.log_batch(run, metrics=metrics)
            row = new_result(
                {**_finetune("bert_tiny", "mlm", "full", "sst2", r, {"accuracy": 0.8}), "mlflow_run_id": run},
                job_id=job.id if r == 0 else None,
            )
            s.add(row)
            s.flush()
            result_ids.append(row.id)
        s.commit()
        job_id = job.id
        many_id = many.id
    dispose_engines()
    with served_home(home, url) as base:
        # The API process opens the MLflow store on its first curves request (imports and the
        # store's schema check): seconds alone, over 20 under the suite's load, which is not what
        # these tests measure. Opened here, once.
        import httpx

        # the first run by its job, the second (recorded by hand, without a job) by its result id
        curves = httpx.get(
            f"{base}/api/v1/views/curves", params={"jobs": str(job_id), "runs": str(result_ids[1])}, timeout=180
        )
        assert curves.status_code == 200 and "train/loss" in curves.text, curves.text[:500]
        yield base, job_id, result_ids, many_id


@pytest.fixture(scope="module")
def browser(site):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    pg.on("response", lambda r: problems.append(f"{r.status}: {r.url}") if r.status >= 400 else None)
    external = _no_external_requests(pg)
    yield pg
    context.close()
    assert not problems and not external, (problems, external)


def traces(page, metric: str) -> list[dict]:
    return page.evaluate(
        "(m) => document.querySelector(`.small-chart[data-metric='${m}']`).data"
        ".map((t) => ({x: t.x, y: t.y, name: t.name, role: t.meta.role, opacity: t.opacity ?? 1,"
        " showlegend: t.showlegend ?? true}))",
        metric,
    )


def layout(page, metric: str) -> dict:
    return page.evaluate(
        "(m) => { const l = document.querySelector(`.small-chart[data-metric='${m}']`).layout;"
        " return {x: l.xaxis.title.text, xformat: l.xaxis.tickformat, y: l.yaxis.type, ytitle: l.yaxis.title?.text,"
        " yformat: l.yaxis.tickformat, legend: l.showlegend}; }",
        metric,
    )


def set_smoothing(page, value: float) -> None:
    page.evaluate(
        "(v) => { const r = document.getElementById('curve-smooth'); r.value = v;"
        " r.dispatchEvent(new Event('input', {bubbles: true})); }",
        value,
    )


def test_job_page_curves_switch_axis_log_scale_and_smoothing(page, site):
    base, job_id, _, _ = site
    page.goto(f"{base}/jobs/{job_id}")
    page.wait_for_selector("#job-curves .small-chart[data-metric='train/loss'] .main-svg")
    groups = page.evaluate(
        "() => [...document.querySelectorAll('#job-curves .curve-group')]"
        ".map((g) => [g.dataset.group, [...g.querySelectorAll('.small-chart')].map((c) => c.dataset.metric)])"
    )
    # One chart per metric, validation first, throughput on its own; the learning rate with training.
    assert groups == [
        ["val", ["val/accuracy"]],
        ["train", ["lr", "train/loss"]],
        ["throughput", ["train/samples_per_s"]],
    ]
    assert page.evaluate("() => [...document.querySelectorAll('#curve-x option')].map((o) => o.value)") == [
        "step",
        "epoch",
        "time_s",
        "tokens",
    ]
    training = _history("training", 1.0)
    loss = traces(page, "train/loss")
    assert [t["name"] for t in loss] == ["training", "control run"]  # one curve per training, named in the legend
    assert loss[0]["x"] == [p["step"] for p in training] and loss[0]["y"] == [p["train/loss"] for p in training]
    assert layout(page, "train/loss")["legend"] and layout(page, "lr")["yformat"] == ".2~e"  # 5e-5, not 50µ or 0.00005
    assert layout(page, "val/accuracy")["ytitle"] == "accuracy (0–1)" and layout(page, "train/loss")["ytitle"] == "loss"

    page.select_option("#curve-x", "epoch")
    assert traces(page, "train/loss")[0]["x"] == [p["epoch"] for p in training]
    assert layout(page, "train/loss")["x"] == "epoch"
    page.select_option("#curve-x", "time_s")  # 295 s: drawn in minutes
    assert traces(page, "train/loss")[0]["x"] == pytest.approx([p["time_s"] / 60 for p in training])
    assert layout(page, "train/loss")["x"] == "wall time (min)"
    page.select_option("#curve-x", "tokens")
    assert traces(page, "val/accuracy")[0]["x"] == [p["tokens"] for p in training if "val/accuracy" in p]
    assert layout(page, "val/accuracy")["xformat"] == ".3~s"  # 59k, not 59000 or 59000.0

    assert layout(page, "train/loss")["y"] == "linear"
    page.check("#curve-log")
    assert layout(page, "train/loss")["y"] == "log" and layout(page, "lr")["y"] == "log"
    assert layout(page, "val/accuracy")["y"] == "linear"  # a 0 has no place on a log axis: that chart stays linear
    assert layout(page, "train/loss")["yformat"] == ".3~g"  # in-between log ticks read 0.5, 2, not bare digits

    set_smoothing(page, 0.6)
    smoothed = traces(page, "train/loss")
    assert [(t["name"], t["role"]) for t in smoothed] == [
        ("training", "raw"),
        ("training", "smoothed"),
        ("control run", "raw"),
        ("control run", "smoothed"),
    ]
    raw, ema = smoothed[0], smoothed[1]
    assert raw["y"] == [p["train/loss"] for p in training] and raw["opacity"] < 0.5 and not raw["showlegend"]
    assert ema["y"] == pytest.approx(tensorboard_ema(raw["y"], 0.6), rel=1e-9)
    assert max(map(abs, _diffs(ema["y"]))) < max(map(abs, _diffs(raw["y"])))  # smoother than the raw curve
    # The view is kept in the URL: a reload shows the same charts.
    assert "x=tokens" in page.url and "log=1" in page.url and "smooth=0.6" in page.url
    page.reload()
    page.wait_for_selector("#job-curves .small-chart[data-metric='train/loss'] .main-svg")
    assert page.input_value("#curve-x") == "tokens" and page.is_checked("#curve-log")
    assert [t["role"] for t in traces(page, "train/loss")][:2] == ["raw", "smoothed"]
    set_smoothing(page, 0)
    assert [t["role"] for t in traces(page, "train/loss")] == ["values", "values"] and "smooth=" not in page.url
    page.fill("#curve-filter", "loss")
    assert page.evaluate(
        "() => [...document.querySelectorAll('#job-curves .small-chart')].map((c) => c.dataset.metric)"
    ) == ["train/loss"]
    page.fill("#curve-filter", "")
    shot(page, "job-curves")

    # Every chart downloads as PNG and SVG, named after the job and the metric; no other export button.
    chart = "#job-curves .small-chart[data-metric='train/loss']"
    page.hover(chart)
    titles = page.evaluate(f'() => [...document.querySelectorAll("{chart} .modebar-btn")].map((b) => b.dataset.title)')
    assert "Download plot as a PNG" in titles and "Download plot as SVG" in titles
    assert not [t for t in titles if "share" in t.lower() or "studio" in t.lower() or "cloud" in t.lower()], titles
    for title, suffix in (("Download plot as a PNG", ".png"), ("Download plot as SVG", ".svg")):
        page.hover(chart)
        with page.expect_download() as download:
            page.click(f"{chart} .modebar-btn[data-title='{title}']")
        assert download.value.suggested_filename == f"job-{job_id}-train_loss{suffix}"


def _diffs(values: list[float]) -> list[float]:
    return [b - a for a, b in zip(values, values[1:], strict=False)]


def test_compare_and_run_pages_draw_the_same_charts_from_mlflow(page, site):
    base, job_id, result_ids, _ = site
    page.goto(f"{base}/compare?runs={','.join(map(str, result_ids))}")  # the run with a job opens by its job
    page.wait_for_url(f"{base}/compare?jobs={job_id}&runs={result_ids[1]}")
    page.wait_for_selector("#curves .small-chart[data-metric='train/loss'] .main-svg")
    charts = page.evaluate("() => [...document.querySelectorAll('#curves .small-chart')].map((c) => c.dataset.metric)")
    # Lightning's epoch and the token count are x-axes, not charts; the one-point size sits in the table.
    assert charts == ["val/accuracy", "train/loss"], charts
    assert page.locator("#single-metrics tr[data-metric='compress/size_bytes'] td.num").count() == 2
    assert page.evaluate("() => [...document.querySelectorAll('#curve-x option')].map((o) => o.value)") == [
        "step",
        "epoch",
        "time_s",
        "tokens",
    ]
    loss = traces(page, "train/loss")
    assert [t["name"] for t in loss] == [f"curves (#{job_id})", f"result {result_ids[1]}"] and layout(
        page, "train/loss"
    )["legend"]
    assert loss[0]["x"] == list(range(10))
    page.select_option("#curve-x", "epoch")
    assert traces(page, "train/loss")[0]["x"] == [s // 5 for s in range(10)]
    assert traces(page, "val/accuracy")[1]["x"] == [s // 5 for s in range(10) if s % 3 == 2]
    page.select_option("#curve-x", "tokens")
    assert traces(page, "train/loss")[1]["x"] == [4096 * (s + 1) for s in range(10)]
    page.select_option("#curve-x", "time_s")
    assert layout(page, "train/loss")["x"] == "wall time (min)"
    wall = traces(page, "train/loss")[0]["x"]
    assert [b - a for a, b in zip(wall, wall[1:], strict=False)] == pytest.approx([0.5] * 9, abs=1e-6)  # 30 s a step
    page.check("#curve-log")
    assert layout(page, "train/loss")["y"] == "log"
    set_smoothing(page, 0.9)
    smoothed = traces(page, "train/loss")
    assert [t["role"] for t in smoothed] == ["raw", "smoothed", "raw", "smoothed"]
    assert smoothed[3]["y"] == pytest.approx(tensorboard_ema(smoothed[2]["y"], 0.9), rel=1e-9)
    assert math.isclose(smoothed[1]["y"][0], smoothed[0]["y"][0])  # debiased: starts at the first value, not near 0
    shot(page, "compare-curves-controls")

    # The run page of a result recorded by hand: the same component on one run.
    page.goto(f"{base}/runs/{result_ids[1]}")
    page.wait_for_selector("#curves .small-chart[data-metric='train/loss'] .main-svg")
    assert [t["name"] for t in traces(page, "train/loss")] == [f"result {result_ids[1]}"]
    assert page.evaluate("() => document.querySelectorAll('#curves .curve-group').length") == 2


def test_sections_past_the_first_charts_start_collapsed_and_draw_when_opened(page, site):
    base, _, _, many_id = site
    page.goto(f"{base}/jobs/{many_id}")
    page.wait_for_selector("#job-curves .small-chart[data-metric='train/m19'] .main-svg")
    sections = page.evaluate(
        "() => [...document.querySelectorAll('#job-curves .curve-group')]"
        ".map((g) => [g.dataset.group, g.open, g.querySelector('summary').textContent])"
    )
    assert sections == [["val", True, "validation (10)"], ["train", True, "training (20)"], ["zeta", False, "zeta (5)"]]
    drawn = "() => document.querySelectorAll('#job-curves .small-chart.js-plotly-plot').length"
    assert page.evaluate(drawn) == 30  # the collapsed section's charts wait until it opens
    # Each plot fits its box (a first draw took its container's 200 px min-height, and the plots overlapped).
    overflow = page.evaluate(
        "() => [...document.querySelectorAll('#job-curves .small-chart.js-plotly-plot')]"
        ".filter((c) => c.querySelector('.svg-container').offsetHeight > c.offsetHeight"
        " || c.offsetHeight < 250).map((c) => c.dataset.metric)"
    )
    assert not overflow, overflow
    page.click("#job-curves .curve-group[data-group='zeta'] summary")
    page.wait_for_function(f"() => ({drawn})() === 35")
    assert traces(page, "zeta/m04")[0]["y"] == [step + 4 for step in range(5)]

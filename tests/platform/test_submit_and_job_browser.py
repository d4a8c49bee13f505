"""The submit form and the job pages in a real Chromium at 1,400 px (issue 42 items 6, 8, 9): the
form refuses a fine-tune without a task and the queue stays as it was; its fields become the
job's overrides; "clone" pre-fills it from a job; a classification job's page shows its confusion
matrix, per-class scores and mistakes, labels its validation curve "validation", ends "Pipeline:
loading…", strips terminal colour codes from the log; a probe job's chart puts selectivity on an
axis of its own, names every line (baselines too) and offers a relative-depth axis; a compress
job's size reads in MiB; the compression chart tells two source models apart. No console error
and no failed request on any page. The jobs are database rows with hand-written summaries, a
progress history and a log: no training, `ptmlab serve` alone, one browser."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from test_dashboard_browser import assert_clean, require_chromium, served_home, watched_page

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

CONFUSION = {
    "labels": ["neg", "pos"],
    "matrix": [[40, 10], [6, 44]],
    "errors": 16,
    "examples": 100,
    "per_class": [
        {"label": "neg", "precision": 0.8696, "recall": 0.8, "f1": 0.8333, "support": 50},
        {"label": "pos", "precision": 0.8148, "recall": 0.88, "f1": 0.8462, "support": 50},
    ],
    "misclassified": [{"index": 3, "text": "not bad at all", "gold": "pos", "predicted": "neg", "score": 0.97}],
}
HISTORY = [
    {
        "step": 10 * i,
        "series": "training",
        "train/loss": 1.0 / (i + 1),
        **({"val/accuracy": 0.5 + i / 20} if i % 2 else {}),
    }
    for i in range(6)
]
LOG = "\x1b[32mINFO\x1b[0m epoch 1 \x1b[1mdone\x1b[0m\n\x1b[2K\rstep 10/10\n"
SIZE_BYTES = 68_977_776  # 65.8 MiB


def _finetune() -> dict:
    return {
        "stage": "finetune",
        "model": "bert_tiny",
        "objective": "mlm",
        "adaptation": "full",
        "task": "sst2",
        "task_kind": "classification",
        "seed": 1,
        "metrics": {"accuracy": 0.84},
        "main_metric": "accuracy",
        "main_score": 0.84,
        "baseline": {"kind": "majority_class", "metric": "accuracy", "value": 0.5},
        "trainable_params": 4_400_000,
        "total_params": 4_400_000,
        "train_time_s": 1.0,
        "steps": 60,
        "wall_time_s": 2.0,
        "confusion": CONFUSION,
        "recipe": {
            "name": "sequence_classification",
            "requested": "auto",
            "values": {
                "stage.lr": {"value": 1e-4, "origin": "override"},
                "stage.batch_size": {"value": 32, "origin": "recipe:sequence_classification"},
            },
        },
        "warnings": ["60 optimizer steps: fine-tuning usually takes at least 100"],
    }


def _probe() -> dict:
    layers = [
        {"layer": n, "accuracy": a, "control_accuracy": c, "selectivity": round(a - c, 4)}
        for n, (a, c) in enumerate([(0.6, 0.55), (0.8, 0.6), (0.9, 0.62), (0.85, 0.6)])
    ]
    return {
        "stage": "probe",
        "model": "bert_tiny",
        "probe_task": "pos",
        "metric": "accuracy",
        "seed": 0,
        "wall_time_s": 1.0,
        "layers": layers,
        "baselines": {"majority": 0.3, "layer0_selectivity": 0.05},
    }


def _compress(source: str, score: float) -> dict:
    measured = {"score": score, "params": 4_000_000, "size_bytes": SIZE_BYTES, "latency_ms": 3.0}
    return {
        "stage": "compress",
        "method": "quantize_dynamic",
        "source_ref": source,
        "task": "sst2",
        "seed": 0,
        "wall_time_s": 1.0,
        "main_metric": "accuracy",
        "compressed": measured,
        "config": {},
        "source": {**measured, "score": score + 0.01, "size_bytes": 4 * SIZE_BYTES, "latency_ms": 9.0},
    }


def seed(session, home: Path) -> dict:
    from ptmlab.db.models import SUCCEEDED, Attempt, Job
    from ptmlab.results import new_result

    def job(stage: str, summary: dict, name: str, overrides: list[str], **extra) -> int:
        row = Job(stage=stage, name=name, overrides=overrides, seed=summary["seed"], status=SUCCEEDED, **extra)
        session.add(row)
        session.flush()
        session.add(new_result(summary, job_id=row.id))
        return row.id

    ids = {
        "cls": job(
            "finetune",
            _finetune(),
            "cls-s1",
            ["task=glue/sst2", "stage.lr=0.0001"],
            tags={"suite": "glue"},
            progress={"step": 50, "history": HISTORY},
        ),
        "probe": job("probe", _probe(), "pos-probe", ["probe=pos"]),
    }
    ids["compress"] = [
        job("compress", _compress(f"job:{ids['cls']}", 0.8), "int8-a", ["compression=quantize_dynamic"]),
        job("compress", _compress(f"job:{ids['probe']}", 0.6), "int8-b", ["compression=quantize_dynamic"]),
    ]
    log = home / "cls.log"
    log.write_text(LOG)
    session.add(Attempt(job_id=ids["cls"], number=1, worker_id="w1", status=SUCCEEDED, log_path=str(log), exit_code=0))
    session.commit()
    return ids


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    require_chromium()
    from ptmlab.db import dispose_engines, migrate, session_scope

    home = tmp_path_factory.mktemp("submit_job_home")
    url = f"sqlite:///{home / 'ptmlab.db'}"
    migrate(url)
    with session_scope(url) as s:
        ids = seed(s, home)
    dispose_engines()
    with served_home(home, url) as base:
        yield base, ids


@pytest.fixture(scope="module")
def page(served):
    with watched_page() as pg:
        yield pg


def _total(base: str) -> int:
    return httpx.get(f"{base}/api/v1/jobs").json()["total"]


def test_submit_refuses_a_finetune_without_a_task_then_queues_the_fields(served, page):
    base, _ = served
    before = _total(base)
    page.goto(f"{base}/submit?stage=finetune")
    page.wait_for_selector("#f-group-task")
    page.fill("#f-lr", "1e-4")
    page.click("#submit-button")
    page.wait_for_function(
        "() => document.querySelector('.field[data-field=\"task\"] .field-error').textContent.includes('needs a task')"
    )
    message = page.inner_text('.field[data-field="task"] .field-error')
    assert "\n" not in message.strip() and _total(base) == before  # one line, nothing queued
    page.select_option("#f-group-task", "glue/sst2")
    for selector, value in (
        ("#f-backbone", "random"),
        ("#f-epochs", "2"),
        ("#f-batch", "16"),
        ("#f-seed", "7"),
        ("#f-job-name", "from-the-form"),
        ("#f-tags", "suite=glue, note=x"),
    ):
        page.fill(selector, value)
    # the recipe it will train with, each value's origin, before anything is queued
    page.wait_for_function(
        "() => document.getElementById('recipe-name')?.textContent === 'sequence_classification+from_scratch'"
    )
    page.wait_for_function("() => document.getElementById('recipe-preview').textContent.includes('stage.lr=0.0001')")
    preview = page.inner_text("#recipe-preview")
    assert "stage.lr=0.0001 (override)" in preview and "stage.epochs=2 (override)" in preview
    assert "scheduler.warmup_ratio=0.1 (recipe:sequence_classification+from_scratch)" in preview
    page.click("#submit-button")
    page.wait_for_selector("#submitted-job")
    job = httpx.get(base + page.get_attribute("#submitted-job", "href").replace("/jobs/", "/api/v1/jobs/")).json()
    assert _total(base) == before + 1 and job["seed"] == 7 and job["name"] == "from-the-form"
    assert job["tags"] == {"suite": "glue", "note": "x"}
    assert {"task=glue/sst2", "backbone=random", "stage.lr=1e-4", "stage.epochs=2", "stage.batch_size=16"} <= set(
        job["overrides"]
    )
    httpx.post(f"{base}/api/v1/jobs/{job['id']}/cancel")
    page.fill("#f-seed", "1,x")
    page.click("#submit-button")
    page.wait_for_function(
        "() => document.querySelector('.field[data-field=\"seed\"] .field-error').textContent.includes('not a whole number')"
    )
    page.fill("#f-seed", "1,2")  # several seeds: a sweep over them
    page.click("#submit-button")
    page.wait_for_function("() => document.getElementById('submit-result').textContent.includes('queued sweep')")
    assert "with 2 jobs" in page.inner_text("#submit-result") and _total(base) == before + 3
    page.wait_for_load_state("networkidle")  # no sweep preview still under way when the page is left
    assert_clean(page, allowed=("422",))


def test_a_classification_job_page_and_its_clone(served, page):
    base, ids = served
    job = ids["cls"]
    page.goto(f"{base}/jobs/{job}")
    page.wait_for_function(f"() => document.getElementById('confusion-{job}')?.data?.[0]?.type === 'heatmap'")
    assert page.evaluate(f"() => document.getElementById('confusion-{job}').data[0].z") == CONFUSION["matrix"]
    rows = page.eval_on_selector_all(
        ".confusion table.per-class tbody tr", "rows => rows.map(r => r.innerText.split('\\t'))"
    )
    assert [r[:3] for r in rows] == [["neg", "87.0", "80.0"], ["pos", "81.5", "88.0"]]
    assert "not bad at all" in page.text_content(".confusion details.misclassified")
    # the pipeline section ends: a job without parents or children says so
    page.wait_for_function("() => !document.getElementById('job-graph').textContent.includes('loading')")
    assert "No parents or children" in page.inner_text("#job-graph")
    # the log without terminal codes
    page.wait_for_function("() => document.getElementById('log').textContent.includes('step 10/10')")
    log = page.inner_text("#log")
    assert "\x1b" not in log and "[32m" not in log and "INFO epoch 1 done" in log
    # the validation curve is named so
    page.wait_for_selector("#job-curves .small-chart[data-metric='val/accuracy'] .main-svg")
    names = page.evaluate(
        "() => document.querySelector(\".small-chart[data-metric='val/accuracy']\").data.map(t => t.name)"
    )
    loss = page.evaluate(
        "() => document.querySelector(\".small-chart[data-metric='train/loss']\").data.map(t => t.name)"
    )
    assert names == ["validation"] and loss == ["training"]
    assert "4.40M" in page.inner_text(".result-digest")  # parameters in k/M
    # the recipe it trained with and the warning on its hyper-parameters
    recipe = page.inner_text(".recipe")
    assert "stage.lr=0.0001 (override)" in recipe and "stage.batch_size=32 (recipe:sequence_classification)" in recipe
    assert "60 optimizer steps" in page.inner_text(".recipe-warning")
    page.click("#clone-link")
    page.wait_for_function("() => document.getElementById('submit-result').textContent.includes('cloned from job')")
    assert page.input_value("#f-stage") == "finetune" and page.input_value("#f-seed") == "1"
    assert page.input_value("#f-overrides") == "task=glue/sst2\nstage.lr=0.0001"
    assert page.input_value("#f-job-name") == "cls-s1-clone" and page.input_value("#f-tags") == "suite=glue"
    assert_clean(page)


def test_a_probe_chart_names_every_line_and_a_compress_job_reads_in_mib(served, page):
    base, ids = served
    page.goto(f"{base}/jobs/{ids['probe']}")
    chart = f"probe-chart-{ids['probe']}-0"
    page.wait_for_function(f"() => document.getElementById('{chart}')?.data?.length > 0")
    traces = page.evaluate(f"() => document.getElementById('{chart}').data.map(t => [t.name, t.yaxis || 'y', t.x])")
    by_name = {name: (axis, x) for name, axis, x in traces}
    assert by_name["selectivity (right axis)"][0] == "y2" and by_name["accuracy"][0] == "y"
    assert by_name["baseline: majority 0.300"][0] == "y" and by_name["baseline: layer0 selectivity 0.050"][0] == "y2"
    assert all(name for name, _, _ in traces)  # every line named
    layout = page.evaluate(
        f"() => {{ const l = document.getElementById('{chart}').layout; "
        "return [l.yaxis.title.text, l.yaxis2.title.text, l.xaxis.title.text]; }"
    )
    assert layout == ["accuracy (0–1)", "selectivity (score − control)", "layer (0 = embeddings)"]
    page.check(".probe-curve input.relative-depth")
    page.wait_for_function(
        f"() => document.getElementById('{chart}').layout.xaxis.title.text.startsWith('relative depth')"
    )
    assert page.evaluate(f"() => document.getElementById('{chart}').data[0].x") == [0, 1 / 3, 2 / 3, 1]
    page.goto(f"{base}/jobs/{ids['compress'][0]}")
    page.wait_for_selector(".result-digest tr[data-name='size (bytes)']")
    size = page.inner_text(".result-digest tr[data-name='size (bytes)']")
    assert "65.8 MiB" in size and "68,977,776" not in size
    page.goto(f"{base}/compression")
    page.wait_for_selector("#comp-chart .main-svg")
    symbols = page.evaluate(
        "() => document.getElementById('comp-chart').data.find(t => t.name === 'quantize_dynamic').marker.symbol"
    )
    assert len(set(symbols)) == 2  # one method, two source models: two symbols
    assert page.eval_on_selector_all("#comp-sources .source", "s => s.length") == 2
    assert "MiB" in page.evaluate("() => document.getElementById('comp-chart').layout.xaxis.title.text")
    assert_clean(page)


def test_navigation_names_the_api_docs_and_the_jobs_list_fits(served, page):
    base, _ = served
    page.goto(f"{base}/jobs")
    page.wait_for_selector("#jobs-table tbody tr")
    assert page.get_attribute('.topbar nav a[href="/docs"]', "href") == "/docs"
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1400
    page.click('.topbar nav a[href="/docs"]')
    page.wait_for_selector(".swagger-ui")
    assert_clean(page)

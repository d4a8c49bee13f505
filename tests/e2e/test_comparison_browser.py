"""Comparisons a researcher can shape and trust, in a real Chromium at 1,400 px (issue 42): a
config key (`stage.lr`) added as a column of the runs table and the table grouped by it (mean ±
std and n per learning rate); the leaderboard's rows by a config key; an A/B of 2 runs against 1
shows no interval and no p-value, and of 3 against 3 seeds the paired test; a sweep page with its
per-value means and the parallel-coordinates plot; a study page with its objective per value and
a degenerate best marked, not highlighted; compare's first screen with the main score's Δ
and the differing keys; the submit form refusing a fine-tune without a task (nothing queued), and
"clone" pre-filling it; a classification job's confusion matrix. Every page without a console
error or a failed request. The runs are database rows (no training): `ptmlab serve` alone."""

from __future__ import annotations

import statistics

import httpx
import pytest
from test_dashboard_browser import assert_clean, require_chromium, served_home, shot, watched_page

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

LR_SCORES = {1e-4: (0.81, 0.83, 0.80), 1e-3: (0.62, 0.70, 0.66)}
B_SCORES = (0.76, 0.78, 0.75)  # model b, the same seeds 1-3: a paired test against lr 1e-4
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


def _summary(model: str, seed: int, score: float, lr: float = 1e-4, **extra) -> dict:
    return {
        "stage": "finetune",
        "model": model,
        "objective": "mlm",
        "adaptation": "full",
        "task": "sst2",
        "task_kind": "classification",
        "seed": seed,
        "metrics": {"accuracy": score},
        "main_metric": "accuracy",
        "main_score": score,
        "baseline": {"metric": "accuracy", "value": 0.5},
        "trainable_params": 10,
        "total_params": 10,
        "train_time_s": 1.0,
        "steps": 10,
        "wall_time_s": 2.0,
        "hparams": {"stage.lr": lr, "stage.epochs": 3, "model.name": model, "task.name": "sst2"},
        **extra,
    }


def seed_runs(session) -> dict:
    from ptmlab.db.models import SUCCEEDED, Job, Sweep
    from ptmlab.results import new_result

    sweep = Sweep(name="lr-grid", spec={}, job_count=6)
    session.add(sweep)
    session.flush()
    ids: dict = {"sweep": sweep.id, "lr": {}}

    def job(summary: dict, name: str, overrides: list[str], sweep_id: str | None = None) -> int:
        row = Job(
            stage="finetune", name=name, overrides=overrides, seed=summary["seed"], status=SUCCEEDED, sweep_id=sweep_id
        )
        session.add(row)
        session.flush()
        session.add(new_result(summary, job_id=row.id, sweep_id=sweep_id))
        return row.id

    for lr, scores in LR_SCORES.items():
        ids["lr"][lr] = [
            job(_summary("a", seed, score, lr), f"a-lr{lr:g}-s{seed}", ["task=glue/sst2", f"stage.lr={lr}"], sweep.id)
            for seed, score in enumerate(scores, start=1)
        ]
    ids["b"] = [
        job(_summary("b", seed, score, confusion=CONFUSION), f"b-s{seed}", ["task=glue/sst2"])
        for seed, score in enumerate(B_SCORES, start=1)
    ]
    ids["c"] = job(_summary("c", 1, 0.70), "c-s1", ["task=glue/sst2"])
    ids["d"] = [
        job(_summary("d", seed, score), f"d-s{seed}", ["task=glue/sst2"]) for seed, score in ((1, 0.72), (2, 0.74))
    ]
    # a task outside GLUE: the GLUE board shows it beside its own and its title says so
    ids["e"] = job(_summary("e", 1, 0.64, task="sentiment"), "e-s1", ["task=sentiment"])
    session.commit()
    return ids


STUDY_BASELINE = 0.6  # above every trial the study below reaches: each of its runs is degenerate


def drive_study_with_results(url: str) -> tuple[str, dict]:
    """A hand-driven study (tests/platform/hand_driven_study.py) whose complete trials' jobs stored a
    result scoring the objective, at or below a majority-class baseline of STUDY_BASELINE."""
    from hand_driven_study import drive_study_by_hand

    from ptmlab import studies
    from ptmlab.db import session_scope
    from ptmlab.results import new_result
    from ptmlab.studies.storage import forget_storages

    study_id = drive_study_by_hand(url, n_trials=4, name="degenerate")
    with session_scope(url) as s:
        status = studies.study_status(s, study_id, url=url)
        for t in status["trials"]:
            if t["state"] == "complete":
                s.add(
                    new_result(
                        {
                            "stage": "sleep",
                            "seed": 0,
                            "main_metric": "score",
                            "main_score": t["value"],
                            "metrics": {"score": t["value"]},
                            "baseline": {"kind": "majority_class", "metric": "score", "value": STUDY_BASELINE},
                        },
                        job_id=t["job_id"],
                    )
                )
        s.commit()
    forget_storages()
    return study_id, status


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    require_chromium()
    from ptmlab.db import dispose_engines, migrate, session_scope

    home = tmp_path_factory.mktemp("comparison_home")
    url = f"sqlite:///{home / 'ptmlab.db'}"
    migrate(url)
    with session_scope(url) as s:
        ids = seed_runs(s)
    ids["study"], ids["study_status"] = drive_study_with_results(url)
    dispose_engines()
    with served_home(home, url) as base:
        yield base, ids


@pytest.fixture(scope="module")
def page(served):
    with watched_page() as pg:
        yield pg


def test_a_config_key_as_a_column_and_the_runs_grouped_by_it(served, page):
    base, ids = served
    page.goto(f"{base}/runs")
    page.wait_for_selector("#runs-table tbody tr")
    page.fill('input[name="add"]', "stage.lr")
    page.dispatch_event('input[name="add"]', "change")
    page.wait_for_selector('#runs-table th[data-column="stage.lr"]')
    assert page.eval_on_selector_all('#column-keys option[value="stage.epochs"]', "os => os.length") == 1
    page.fill('input[name="filter"]', "model=a")  # the sweep's runs
    page.dispatch_event('input[name="filter"]', "change")
    page.wait_for_function("() => document.getElementById('runs-info').textContent.startsWith('6 of')")
    page.fill('input[name="group"]', "stage.lr")
    page.dispatch_event('input[name="group"]', "change")
    page.wait_for_selector("#groups-table tbody tr.group-row")
    groups = page.eval_on_selector_all(
        "#groups-table tbody tr.group-row",
        """rows => rows.map(r => ({
        key: r.cells[0].dataset.value, n: r.querySelector('[data-n]').dataset.n,
        mean: r.querySelector('[data-column="main_score"]')?.dataset.mean,
        std: r.querySelector('[data-column="main_score"]')?.dataset.std, text: r.innerText}))""",
    )
    by_lr = {float(g["key"]): g for g in groups if g["key"] not in (None, "")}
    for lr, scores in LR_SCORES.items():
        assert by_lr[lr]["n"] == "3"
        assert float(by_lr[lr]["mean"]) == pytest.approx(statistics.fmean(scores))
        assert float(by_lr[lr]["std"]) == pytest.approx(statistics.stdev(scores))
        assert "±" in by_lr[lr]["text"] and "over seeds" in by_lr[lr]["text"]
        assert f"{min(scores):.4f} – {max(scores):.4f}" in by_lr[lr]["text"]  # min – max under mean ± std
    members = page.eval_on_selector_all(
        "#groups-table tbody tr.group-row td.members a", "as => as.map(a => a.getAttribute('href'))"
    )
    assert sorted(members) == sorted(f"/jobs/{j}" for js in ids["lr"].values() for j in js)
    # one score column, its numbers with the same decimals in every row ("0.8000", never "0.8")
    scores = page.eval_on_selector_all(
        '#runs-table tbody td[data-column="main_score"]', "tds => tds.map(t => t.textContent)"
    )
    assert len(scores) == 6 and all(len(t.split(".")[1]) == 4 for t in scores), scores
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1400
    shot(page, "runs-grouped-by-lr")
    page.fill('input[name="group"]', "stage.lrr")
    page.dispatch_event('input[name="group"]', "change")
    page.wait_for_function("() => document.getElementById('runs-info').textContent.includes('stage.lrr')")
    info = page.eval_on_selector("#runs-info", "p => [p.textContent, p.className]")
    assert "is in no run (did you mean stage.lr" in info[0] and "error" in info[1]
    assert_clean(page, allowed=("422: ", "status of 422"))


def test_leaderboard_rows_by_a_config_key_and_the_ab_panel(served, page):
    base, ids = served
    page.goto(f"{base}/leaderboard?group_by=model,stage.lr")
    page.wait_for_selector("#leaderboard tbody tr")
    labels = page.eval_on_selector_all("#leaderboard tbody tr", "rows => rows.map(r => r.dataset.config)")
    assert "a / 0.0001" in labels and "a / 0.001" in labels and "b / 0.0001" in labels
    assert page.inner_text("h1") == "GLUE leaderboard and 1 other task"  # sentiment is not GLUE's
    page.fill('input[name="group_by"]', "model,")
    page.dispatch_event('input[name="group_by"]', "input")
    page.wait_for_selector('#lb-keys option[value="model,stage.lr"]', state="attached")

    def ab(label_a: str, label_b: str) -> dict:
        page.uncheck("#leaderboard input.pick:checked") if page.query_selector(
            "#leaderboard input.pick:checked"
        ) else None
        for label in (label_a, label_b):
            page.check(f'#leaderboard tr[data-config="{label}"] input.pick')
        page.wait_for_selector("#compare-table tbody tr")
        return page.eval_on_selector(
            '#compare-table tr[data-task="sst2"]',
            """r => ({p: r.dataset.p,
            low: r.dataset.ciLow, test: r.querySelector('td.test').textContent, text: r.innerText})""",
        )

    page.goto(f"{base}/leaderboard")  # default rows: one config each, by model / objective / adaptation
    page.wait_for_selector("#leaderboard tbody tr")
    small = ab("d / mlm / full", "c / mlm / full")
    assert small["p"] == "" and small["low"] == "" and small["test"] == "n too small"
    assert "72.0, 74.0 | 70.0" in small["text"]
    page.goto(f"{base}/leaderboard")
    page.wait_for_selector("#leaderboard tbody tr")
    paired = ab("a / mlm / full · stage.lr=0.0001", "b / mlm / full")
    assert paired["test"].startswith("paired t-test (n 3 vs 3") and paired["p"] != "" and paired["low"] != ""
    shot(page, "leaderboard-ab-paired")
    page.goto(f"{base}/leaderboard?benchmark=tasks")  # no QA, tagging or choice run: it says where the fine-tunes are
    page.wait_for_selector("#lb-empty:not([hidden]) a[href='/leaderboard']")
    assert page.inner_text("h1") == "Tasks (QA, tagging, choice) leaderboard"
    assert_clean(page)


def test_the_sweep_page_shows_per_value_means_and_parallel_coordinates(served, page):
    base, ids = served
    page.goto(f"{base}/sweeps/{ids['sweep']}")
    page.wait_for_selector('table.per-value[data-key="stage.lr"] tbody tr')
    rows = page.eval_on_selector_all(
        'table.per-value[data-key="stage.lr"] tbody tr',
        "rows => rows.map(r => [r.dataset.value, r.dataset.mean, r.dataset.n])",
    )
    means = {float(v): (float(m), int(n)) for v, m, n in rows}
    for lr, scores in LR_SCORES.items():
        assert means[lr][0] == pytest.approx(statistics.fmean(scores)) and means[lr][1] == 3
    spreads = page.eval_on_selector_all(
        'table.per-value[data-key="stage.lr"] tbody tr', "rows => rows.map(r => r.cells[3].textContent)"
    )
    assert spreads == ["over seeds", "over seeds"]
    page.wait_for_function("() => document.getElementById('parcoords').data?.[0]?.type === 'parcoords'")
    dims = page.evaluate("() => document.getElementById('parcoords').data[0].dimensions.map(d => d.label)")
    assert dims == ["stage.lr", "accuracy"]
    assert page.evaluate("() => document.querySelector('#score-vs [data-key=\"stage.lr\"]').data.length") >= 2
    shot(page, "sweep")
    assert_clean(page)


def test_the_study_page_shows_the_objective_per_value_and_a_degenerate_best(served, page):
    base, ids = served
    complete = [t for t in ids["study_status"]["trials"] if t["state"] == "complete"]
    page.goto(f"{base}/studies/{ids['study']}")
    page.wait_for_selector('#study[data-loaded="true"]')
    rows = page.eval_on_selector_all(
        'table.per-value[data-key="stage.seconds"] tbody tr',
        "rows => rows.map(r => [r.dataset.value, r.dataset.mean, r.dataset.n])",
    )
    for value, mean, n in rows:
        scores = [t["value"] for t in complete if str(t["params"]["stage.seconds"]) == value]
        assert int(n) == len(scores) and (not scores or float(mean) == pytest.approx(statistics.fmean(scores)))
    assert page.query_selector('.per-value-none[data-key="stage.quality"]')  # each trial drew its own quality
    # every complete trial's run sits at or below the baseline: marked, and its best is a warning, not green
    marked = page.eval_on_selector_all(
        '#study-trials tr[data-degenerate="true"]', "rows => rows.map(r => Number(r.dataset.number))"
    )
    assert sorted(marked) == sorted(t["number"] for t in complete)
    assert page.query_selector("#study-trials tr.best-row") is None
    warning = page.inner_text("#study-warning")
    assert f"majority-class baseline ({STUDY_BASELINE:g})" in warning and page.is_visible("#study-warning")
    names = page.evaluate(
        "() => document.querySelector('#scatter-charts [data-param=\"stage.seconds\"]').data.map(t => t.name)"
    )
    assert f"majority-class baseline {STUDY_BASELINE:g}" in names
    assert page.evaluate("() => document.getElementById('parcoords-chart').data[0].type") == "parcoords"
    page.wait_for_selector("#top-curves p")  # the top runs logged no MLflow history: said, not an error
    shot(page, "study-per-value")
    assert_clean(page)


def test_compare_answers_first(served, page):
    base, ids = served
    a, b = ids["lr"][1e-4][0], ids["b"][0]
    page.goto(f"{base}/compare?jobs={a},{b}")
    page.wait_for_selector("#answer-table tbody tr.main")
    main = page.inner_text("#answer-table tbody tr.main")
    assert "main_score (accuracy)" in main and "Δ -0.05" in main and "%)" in main
    header = page.eval_on_selector_all("#answer-table thead th", "hs => hs.map(h => h.textContent)")
    assert header[1:] == [f"a-lr0.0001-s1 (#{a})", f"b-s1 (#{b})"]
    # the first screen: main score, then the config keys that differ (no other number differs here)
    differing = page.eval_on_selector_all("#config-table tbody tr", "rows => rows.map(r => r.dataset.key)")
    assert page.is_checked("#only-diff") and "model" in " ".join(differing)
    box = page.eval_on_selector("#config-table", "t => t.getBoundingClientRect().top")
    assert box < 900
    shot(page, "compare-first-screen")
    page.goto(f"{base}/runs/1")  # a result's page is its job's
    page.wait_for_url(f"{base}/jobs/*")
    page.wait_for_load_state("networkidle")  # leaving while the job page still fetches aborts its requests
    page.goto(f"{base}/compare?runs=1,7")  # an old link naming results opens the comparison of their jobs
    page.wait_for_url(f"{base}/compare?jobs=*")
    page.wait_for_selector("#answer-table tbody tr.main")
    assert_clean(page, allowed=("curves",))


def test_submit_refuses_a_finetune_without_a_task_and_clone_prefills(served, page):
    base, ids = served
    before = httpx.get(f"{base}/api/v1/jobs").json()["total"]
    page.goto(f"{base}/submit?stage=finetune")
    page.wait_for_selector("#f-group-task")
    page.fill("#f-lr", "1e-4")
    page.click("#submit-button")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.field-error')].some(e => e.textContent.includes('needs a task'))"
    )
    assert httpx.get(f"{base}/api/v1/jobs").json()["total"] == before
    job = ids["b"][1]
    page.goto(f"{base}/jobs/{job}")
    page.wait_for_selector(".confusion table.per-class tbody tr")
    page.wait_for_function(
        f"() => document.getElementById('confusion-{job}')?.data?.[0]?.type === 'heatmap'"
    ) if page.query_selector(f"#confusion-{job}") else None
    classes = page.eval_on_selector_all(".confusion table.per-class tbody tr", "rows => rows.map(r => r.dataset.label)")
    assert classes == ["neg", "pos"] and "16 of 100 wrong" in page.inner_text(".confusion h3")
    shot(page, "job-confusion")
    page.click("#clone-link")
    page.wait_for_function("() => document.getElementById('submit-result').textContent.includes('cloned from job')")
    assert page.input_value("#f-overrides") == "task=glue/sst2" and page.input_value("#f-seed") == "2"
    assert page.input_value("#f-job-name") == "b-s2-clone" and page.input_value("#f-stage") == "finetune"
    assert_clean(page, allowed=("422: ", "status of 422"))

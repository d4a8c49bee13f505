"""A multi-objective study's Pareto front in a real browser (issue 26 item 5): the study page marks
its Pareto-optimal trials and draws them, the compression page's `?study=` shows the same trials
on its trade-off chart and links each to its job. The study is tests/platform/
test_study_multiobjective.py's hand-driven compress study; `ptmlab serve` runs, no worker."""

from __future__ import annotations

import pytest
from test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, require_chromium, served_home, shot

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    require_chromium()
    from test_study_multiobjective import drive_compress_study

    from ptmlab import studies
    from ptmlab.db import dispose_engines, migrate, session_scope
    from ptmlab.studies.storage import forget_storages

    home = tmp_path_factory.mktemp("pareto_home")
    url = f"sqlite:///{home / 'ptmlab.db'}"
    migrate(url)
    study_id = drive_compress_study(url, sampler="random")
    with session_scope(url) as s:
        status = studies.study_status(s, study_id, url=url)
    forget_storages()
    dispose_engines()
    with served_home(home, url) as base:
        yield base, status


@pytest.fixture(scope="module")
def page(served):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        pg = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        pg.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        pg.on("pageerror", lambda exc: errors.append(str(exc)))
        yield pg
        browser.close()
        assert not errors, f"JavaScript errors: {errors}"


def test_the_study_page_and_the_compression_page_show_the_same_pareto_trials(served, page):
    base, status = served
    study_id, pareto = status["id"], set(status["pareto"])
    jobs = {t["number"]: t["job_id"] for t in status["trials"]}

    page.goto(f"{base}/studies/{study_id}")
    page.wait_for_selector('#study[data-loaded="true"]')
    marked = {
        int(n)
        for n in page.eval_on_selector_all(
            '#study-trials tr[data-pareto="true"]', "rows => rows.map(r => r.dataset.number)"
        )
    }
    assert marked == pareto
    traces = page.evaluate("() => document.getElementById('pareto-chart').data.map(t => [t.name, t.x.length])")
    assert dict(traces) == {"Pareto front": len(pareto), "dominated": len(status["trials"]) - len(pareto)}
    links = page.eval_on_selector_all("a.pareto-trial", "as => as.map(a => a.getAttribute('href'))")
    assert sorted(links) == sorted(f"/jobs/{jobs[n]}" for n in pareto)
    shot(page, "study-pareto")

    page.click(f'a[href="/compression?study={study_id}"]')
    page.wait_for_selector("#comp-table td.study-trial")
    front_trace = page.evaluate(
        "() => document.getElementById('comp-chart').data"
        ".filter(t => t.name.includes('Pareto front (score, size_bytes)')).map(t => t.x.length)"
    )
    assert front_trace == [len(pareto)]
    on_front = page.eval_on_selector_all(
        "#comp-table td.study-trial a",
        "as => as.filter(a => a.textContent.includes('◆')).map(a => a.getAttribute('href'))",
    )
    assert sorted(on_front) == sorted(f"/jobs/{jobs[n]}" for n in pareto)
    note = page.inner_text("#comp-study")
    assert "maximise score, minimise size_bytes" in note and f"{len(pareto)} trial(s) on its Pareto front" in note
    shot(page, "compression-study-pareto")

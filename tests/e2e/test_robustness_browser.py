"""The robustness page and the compression page's accuracy-under-attack axis in a real browser
(issue 25 item 4), on tests/platform/test_robustness_view.py's hand-made jobs and results (two
pipelines: a teacher, its int8 and distilled versions attacked by deepwordbug and pwws; full,
FreeLB and LoRA fine-tunes attacked by deepwordbug). `ptmlab serve` runs, no worker."""

from __future__ import annotations

import pytest
from test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, require_chromium, served_home, shot

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    require_chromium()
    from test_robustness_view import seed_robustness

    from ptmlab.db import dispose_engines, migrate

    home = tmp_path_factory.mktemp("robustness_home")
    url = f"sqlite:///{home / 'ptmlab.db'}"
    migrate(url)
    ids, pipelines = seed_robustness(url, home)
    dispose_engines()
    with served_home(home, url) as base:
        yield base, ids, pipelines


def test_robustness_bars_table_filter_and_the_compression_axis(served):
    from playwright.sync_api import sync_playwright

    base, ids, pipelines = served
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.set_default_timeout(WAIT_MS)
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(str(exc)))
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)

        page.goto(f"{base}/robustness", wait_until="networkidle")
        page.wait_for_selector("#rob-chart .main-svg")
        traces = dict(page.evaluate("() => document.getElementById('rob-chart').data.map(t => [t.name, t.y])"))
        models = page.evaluate("() => document.getElementById('rob-chart').data[0].x")
        assert models == ["teacher", "teacher-int8", "student", "full", "freelb", "lora"]
        assert traces["deepwordbug"] == [0.3, 0.25, 0.1, 0.2, 0.4, 0.3]
        assert traces["pwws"] == [0.2, 0.15, None, None, None, None] and traces["clean"][2] == 0.85
        cell = page.locator('#rob-table tr:has-text("teacher-int8") td[data-recipe="pwws"][data-metric="success_rate"]')
        assert cell.inner_text() == "0.8300"
        shot(page, "robustness")
        page.select_option("select[name=pipeline]", pipelines["robustness_adaptation"])
        page.wait_for_function("() => document.querySelectorAll('#rob-table tbody tr').length === 3")
        assert f"pipeline={pipelines['robustness_adaptation']}" in page.url

        page.goto(f"{base}/compression?y=attack:pwws", wait_until="networkidle")
        page.wait_for_selector("#comp-chart .main-svg")
        assert page.input_value("select[name=y]") == "attack:pwws"
        drawn = dict(page.evaluate("() => document.getElementById('comp-chart').data.map(t => [t.name, t.y])"))
        assert drawn["quantize_dynamic"] == [0.15] and drawn["distill"] == [] and drawn["uncompressed source"] == [0.2]
        assert page.inner_text("#comp-robustness").startswith("1 of 3 models have no pwws attack result")
        browser.close()
    assert not problems, problems

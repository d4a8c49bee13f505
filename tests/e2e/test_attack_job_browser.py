"""An attack job's page in a real browser (issue 25 item 2): the summary's figures in the stage's
terms and the attacked examples, original and perturbed side by side with the changed words marked,
no console error. The records are written by the stage's own writer (AttackRecord, write_records)
and hold HTML-like text, which the page must show as text. The records endpoint on a real tiny
attack run: tests/lightning_modules/test_triggers_and_augmentation.py. `ptmlab serve` runs, no worker."""

from __future__ import annotations

import pytest

from test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, require_chromium, served_home, shot

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def write_attack_run(run_dir) -> dict:
    """A deepwordbug run folder: three records (one success, one failure, one skipped) and the
    contract's dump of its summary, as the worker stores it."""
    from lightning_modules.attacks.recipe import FAILED, RECORDS_FILE, SKIPPED, SUCCEEDED, AttackRecord
    from lightning_modules.stages.attack import write_records
    from ptmlab.contracts import AttackSummary

    records = [
        AttackRecord(index=3, id="3", original="the film was <b>good</b> & fine", context=None, label=1,
                     prediction_before=1, status=SUCCEEDED, perturbed="the flim was <b>good</b> & fine",
                     prediction_after=0, queries=9, words=6, changed_indices=[1]),
        AttackRecord(index=7, id="7", original="a great story", context=None, label=1, prediction_before=1,
                     status=FAILED, perturbed="a graet story", prediction_after=1, queries=14, words=3,
                     changed_indices=[1]),
        AttackRecord(index=9, id="9", original="not bad", context=None, label=1, prediction_before=0, status=SKIPPED,
                     words=2),
    ]
    write_records(records, run_dir / RECORDS_FILE)
    return AttackSummary(seed=5, wall_time_s=2.0, run_dir=str(run_dir), recipe="deepwordbug", source="job:1",
                         task="sst2", split="dev", num_examples=3, constraints={"max_edit_distance": 30},
                         class_labels=["negative", "positive"], clean_accuracy=2 / 3, accuracy_under_attack=1 / 3,
                         success_rate=0.5, perturbed_word_ratio=1 / 6, queries=11.5, seconds_per_example=0.25,
                         counts={"succeeded": 1, "failed": 1, "skipped": 1},
                         records_file=str(run_dir / RECORDS_FILE)).model_dump()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    require_chromium()
    from ptmlab.db import dispose_engines, migrate, session_scope
    from ptmlab.db.models import SUCCEEDED
    from ptmlab.queue import submit_job
    from ptmlab.results import new_result

    home = tmp_path_factory.mktemp("attack_home")
    url = f"sqlite:///{home / 'ptmlab.db'}"
    migrate(url)
    summary = write_attack_run(home / "run")
    with session_scope(url) as s:
        job = submit_job(s, stage="attack", overrides=["attack=deepwordbug"], queue="seeded")
        job.status, job.run_dir = SUCCEEDED, summary["run_dir"]
        s.add(new_result(summary, job_id=job.id))
        s.commit()
        job_id = job.id
    dispose_engines()
    with served_home(home, url) as base:
        yield base, job_id


def test_the_attack_job_page_shows_the_figures_and_the_changed_words(served):
    from playwright.sync_api import sync_playwright

    base, job_id = served
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.set_default_timeout(WAIT_MS)
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(str(exc)))
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)

        page.goto(f"{base}/jobs/{job_id}", wait_until="networkidle")
        page.wait_for_selector("#attack-records:not([hidden]) table.attack-records")
        figure = lambda name: page.inner_text(f'table.result-digest tr[data-name="{name}"] td.num')  # noqa: E731
        assert figure("clean accuracy") == "0.6667" and figure("accuracy under attack") == "0.3333"
        assert (figure("success rate"), figure("perturbed word ratio"), figure("queries")) == ("0.5000", "0.1667", "11.50")
        assert (figure("recipe"), figure("sample size"), figure("seed")) == ("deepwordbug", "3", "5")
        assert page.inner_text("#attack-records-counts") == "1 succeeded · 1 failed · 1 skipped (misclassified before the attack)"
        success = page.locator('table.attack-records tr[data-status="succeeded"]')
        assert success.locator("td.perturbed mark.changed").all_inner_texts() == ["flim"]
        assert success.locator("td.original mark.changed").all_inner_texts() == ["film"]
        assert success.locator("td.original").inner_text() == "the film was <b>good</b> & fine"   # text, not markup
        assert page.locator("#attack-records b").count() == 0
        assert "positive → negative" in success.inner_text()
        failure = page.locator('table.attack-records tr[data-status="failed"]')
        assert failure.locator("td.perturbed mark.changed").all_inner_texts() == ["graet"]
        assert page.locator('table.attack-records tr[data-status="skipped"]').count() == 0
        shot(page, "attack-job")
        browser.close()
    assert not problems, problems

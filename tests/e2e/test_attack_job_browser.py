"""An attack job's page in a real browser (issue 25 item 2): the summary's figures in the stage's
terms and the attacked examples, original and perturbed side by side with the changed words marked,
no console error; on the same server, fine-tune job pages with their predictions (issues 23 and 24,
item 6: a tagged sentence with its wrong tag marked, source / reference / output triples), written
by the stage's own writers. The records are written by the stage's own writer (AttackRecord, write_records)
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
        AttackRecord(
            index=3,
            id="3",
            original="the film was <b>good</b> & fine",
            context=None,
            label=1,
            prediction_before=1,
            status=SUCCEEDED,
            perturbed="the flim was <b>good</b> & fine",
            prediction_after=0,
            queries=9,
            words=6,
            changed_indices=[1],
        ),
        AttackRecord(
            index=7,
            id="7",
            original="a great story",
            context=None,
            label=1,
            prediction_before=1,
            status=FAILED,
            perturbed="a graet story",
            prediction_after=1,
            queries=14,
            words=3,
            changed_indices=[1],
        ),
        AttackRecord(
            index=9, id="9", original="not bad", context=None, label=1, prediction_before=0, status=SKIPPED, words=2
        ),
    ]
    write_records(records, run_dir / RECORDS_FILE)
    return AttackSummary(
        seed=5,
        wall_time_s=2.0,
        run_dir=str(run_dir),
        recipe="deepwordbug",
        source="job:1",
        task="sst2",
        split="dev",
        num_examples=3,
        constraints={"max_edit_distance": 30},
        class_labels=["negative", "positive"],
        clean_accuracy=2 / 3,
        accuracy_under_attack=1 / 3,
        success_rate=0.5,
        perturbed_word_ratio=1 / 6,
        queries=11.5,
        seconds_per_example=0.25,
        counts={"succeeded": 1, "failed": 1, "skipped": 1},
        records_file=str(run_dir / RECORDS_FILE),
    ).model_dump()


def write_finetune_runs(home) -> list[dict]:
    """A NER run and a generation run: predictions written by the finetune stage's writers, the
    summaries as the worker stores them."""
    from lightning_modules.data.tagged import TaggedSentence
    from lightning_modules.data.task_data import Split, TextExample
    from lightning_modules.tasks.generation_predictions import write_generations
    from lightning_modules.tasks.tagged_predictions import write_tagged_predictions
    from ptmlab.contracts import FinetuneSummary

    words = ("alice", "met", "<i>bob</i>")
    tagged = Split(
        "dev",
        [TaggedSentence(words, None, 1, "0", (1, 2, 3), tuple(zip(words, ("B-PER", "O", "B-PER"))))],
        "dev.conll",
        has_labels=True,
    )
    write_tagged_predictions(home / "ner" / "predictions" / "dev.ner.tsv", tagged, [["B-PER", "O", "O"]])
    pairs = Split(
        "dev", [TextExample(texts=("a b <c>",), label=("c b a",), row=1, id="0")], "dev.jsonl", has_labels=True
    )
    write_generations(home / "gen" / "predictions" / "dev.jsonl", pairs, ["c a b"])
    # a classification run's dev predictions as tasks/predictions.py writes them: index, prediction, label
    (home / "cls" / "predictions").mkdir(parents=True)
    (home / "cls" / "predictions" / "dev.tsv").write_text(
        "index\tprediction\tlabel\n0\tpositive\tpositive\n1\t<b>positive</b>\tnegative\n"
    )

    def summary(task, kind, folder, metrics, **extra):
        main = next(iter(metrics))
        return FinetuneSummary(
            seed=1,
            wall_time_s=1.0,
            run_dir=str(home / folder),
            model="t5_tiny",
            adaptation="full",
            task=task,
            task_kind=kind,
            metrics=metrics,
            main_metric=main,
            main_score=metrics[main],
            trainable_params=1,
            total_params=1,
            train_time_s=1.0,
            steps=1,
            **extra,
        ).model_dump()

    return [
        summary("ner", "token_classification", "ner", {"entity_f1": 0.5}),
        summary(
            "seq2seq",
            "generation",
            "gen",
            {"bleu": 30.0},
            generation={
                "decoding": {"strategy": "greedy"},
                "metric_signatures": {},
                "generated_tokens": 3,
                "latency_ms_per_example": 2.5,
            },
        ),
        summary("sst2", "classification", "cls", {"accuracy": 0.5}),
    ]


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
        finetunes = []
        for row in write_finetune_runs(home):
            finetune = submit_job(s, stage="finetune", overrides=[], queue="seeded")
            finetune.status, finetune.run_dir = SUCCEEDED, row["run_dir"]
            s.add(new_result(row, job_id=finetune.id))
            finetunes.append(finetune)
        s.commit()
        job_id, finetune_ids = job.id, [f.id for f in finetunes]
    dispose_engines()
    with served_home(home, url) as base:
        yield base, job_id, finetune_ids


def test_the_attack_job_page_shows_the_figures_and_the_changed_words(served):
    from playwright.sync_api import sync_playwright

    base, job_id, (ner_job, generation_job, classification_job) = served
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.set_default_timeout(WAIT_MS)
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(str(exc)))
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)

        page.goto(f"{base}/jobs/{job_id}", wait_until="networkidle")
        page.wait_for_selector("#attack-records:not([hidden]) table.attack-records")
        figure = lambda name: page.inner_text(f'table.result-digest tr[data-name="{name}"] td.num')
        assert figure("clean accuracy") == "0.6667" and figure("accuracy under attack") == "0.3333"
        assert (figure("success rate"), figure("perturbed word ratio"), figure("queries")) == (
            "0.5000",
            "0.1667",
            "11.50",
        )
        assert (figure("recipe"), figure("sample size"), figure("seed")) == ("deepwordbug", "3", "5")
        assert (
            page.inner_text("#attack-records-counts")
            == "1 succeeded · 1 failed · 1 skipped (misclassified before the attack)"
        )
        success = page.locator('table.attack-records tr[data-status="succeeded"]')
        assert success.locator("td.perturbed mark.changed").all_inner_texts() == ["flim"]
        assert success.locator("td.original mark.changed").all_inner_texts() == ["film"]
        assert success.locator("td.original").inner_text() == "the film was <b>good</b> & fine"  # text, not markup
        assert page.locator("#attack-records b").count() == 0
        assert "positive → negative" in success.inner_text()
        failure = page.locator('table.attack-records tr[data-status="failed"]')
        assert failure.locator("td.perturbed mark.changed").all_inner_texts() == ["graet"]
        assert page.locator('table.attack-records tr[data-status="skipped"]').count() == 0
        shot(page, "attack-job")

        page.goto(f"{base}/jobs/{ner_job}", wait_until="networkidle")
        page.wait_for_selector("#predictions:not([hidden]) table.predictions")
        assert page.inner_text("#predictions-info") == "ner · dev split · 1–1 of 1"
        sentence = page.locator("table.predictions td.tagged-sentence")
        assert sentence.locator("mark.tag-error").all_inner_texts() == ["<i>bob</i>O≠B-PER"]  # text, not markup
        assert page.locator("#predictions i").count() == 0
        page.goto(f"{base}/jobs/{generation_job}", wait_until="networkidle")
        page.wait_for_selector("#predictions:not([hidden]) table.predictions")
        assert page.locator("table.predictions tbody td").all_inner_texts() == ["0", "a b <c>", "c b a", "c a b"]
        assert (
            page.inner_text('table.result-digest tr[data-name="decoding latency (ms per example)"] td.num') == "2.500"
        )
        page.goto(f"{base}/jobs/{classification_job}", wait_until="networkidle")
        page.wait_for_selector("#predictions:not([hidden]) table.predictions.kind-classification")
        assert page.inner_text("#predictions-info") == "sst2 · dev split · 1–2 of 2"
        rows = page.locator("table.predictions tbody tr")
        assert rows.nth(0).locator("td").all_inner_texts() == ["0", "0", "positive", "positive"]
        assert rows.nth(1).locator("mark.tag-error").all_inner_texts() == ["<b>positive</b>"]  # text, not markup
        page.check("#predictions-errors")
        page.wait_for_function("() => document.getElementById('predictions-info').textContent.endsWith('1 wrong')")
        browser.close()
    assert not problems, problems

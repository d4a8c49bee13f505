"""A fine-tune job's prediction samples on its job page (issues 23 and 24, item 6):
`GET /api/v1/jobs/{id}/predictions` over predictions folders laid out as the finetune stage writes
them (generation: source / references / output; span extraction: the answer beside the gold ones;
token classification: CoNLL and CoNLL-U columns + the predicted tag, errors marked; multiple
choice; classification: the predicted class beside the gold one, with the run's confusion report),
paged, `errors_only`, another split, the job page's digest, and what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptmlab.contracts import FinetuneSummary


def summary(task: str, kind: str | None, run_dir: Path, metrics: dict, **extra) -> dict:
    main = next(iter(metrics))
    return FinetuneSummary(
        seed=1,
        wall_time_s=1.0,
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
        run_dir=str(run_dir),
        **extra,
    ).model_dump()


def write_lines(path: Path, lines: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((json.dumps(x) if isinstance(x, dict) else x) + "\n" for x in lines), encoding="utf-8")


def seed_runs(root: Path) -> dict[str, tuple[dict, Path]]:
    """Each kind's run folder as the stage leaves it: the predictions files (the writers in
    lightning_modules/tasks/*_predictions.py, span_answers.py, choice_metrics.py) and config.yaml."""
    runs = {}
    gen = root / "gen"
    write_lines(
        gen / "predictions" / "dev.jsonl",
        [
            {"id": str(i), "source": f"source {i} <b>", "references": [f"ref {i}", f"other {i}"], "output": f"out {i}"}
            for i in range(25)
        ],
    )
    write_lines(gen / "predictions" / "test.jsonl", [{"id": "0", "source": "unlabelled", "output": "o"}])
    runs["gen"] = (
        summary(
            "wmt16_en_ro",
            "generation",
            gen,
            {"bleu": 12.5, "chrf": 40.0},
            generation={
                "decoding": {"strategy": "beam", "num_beams": 4, "max_new_tokens": 64},
                "metric_signatures": {},
                "generated_tokens": 100,
                "tokens_per_s": 250.0,
                "latency_ms_per_example": 4.5,
            },
        ),
        gen,
    )
    span = root / "span"
    write_lines(
        span / "predictions" / "dev.squad.jsonl",
        [
            {"id": "q0", "prediction": "Denver Broncos", "gold": ["Denver Broncos", "the Broncos"]},
            {"id": "q1", "prediction": "Carolina", "gold": ["Carolina Panthers"]},
            {"id": "q2", "prediction": "", "gold": [], "no_answer_score": 1.5},
        ],
    )  # v2.0: unanswerable, answered ""
    runs["span"] = summary("squad", None, span, {"f1": 0.6, "exact_match": 0.5}, no_answer_threshold=0.0), span
    ner = root / "ner"
    # conlleval's layout: token, gold, predicted (the input's columns, then the prediction)
    write_lines(
        ner / "predictions" / "dev.ner.tsv",
        ["alice\tB-PER\tB-PER", "sat\tO\tO", "", "in\tO\tO", "paris\tB-LOC\tO", "today\tO\tB-PER", ""],
    )
    (ner / "config.yaml").write_text("task:\n  data:\n    token_column: 0\n    label_column: -1\n")
    runs["ner"] = summary("ner", "token_classification", ner, {"entity_f1": 0.5}), ner
    upos = root / "upos"
    # CoNLL-U's ten columns and the prediction; the gold is UPOS (column 4), the word FORM (column 2)
    write_lines(
        upos / "predictions" / "dev.upos.tsv",
        ["1\tDogs\t_\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\tNOUN", "2\tbark\t_\tVERB\tVBP\t_\t0\troot\t_\t_\tNOUN", ""],
    )
    (upos / "config.yaml").write_text("task:\n  data:\n    label_column: upos\n")
    runs["upos"] = summary("upos", "token_classification", upos, {"token_accuracy": 0.5}), upos
    choice = root / "choice"
    write_lines(
        choice / "predictions" / "dev.copa.jsonl",
        [
            {"id": "0", "prediction": 1, "scores": [-2.0, -1.0], "label": 1},
            {"id": "1", "prediction": 0, "scores": [-0.5, -3.0], "label": 1},
        ],
    )
    runs["choice"] = (
        summary("copa", "multiple_choice", choice, {"accuracy": 0.5}, multiple_choice={"scoring": "head"}),
        choice,
    )
    sst2 = root / "sst2"
    # tasks/predictions.py's layout (index, predicted label, gold label) and tasks/confusion.py's report
    write_lines(
        sst2 / "predictions" / "dev.tsv", ["index\tprediction\tlabel", "0\tpos\tpos", "1\tneg\tpos", "2\tneg\tneg"]
    )
    (sst2 / "predictions" / "confusion.json").write_text(json.dumps(SST2_CONFUSION))
    runs["sst2"] = summary("sst2", "classification", sst2, {"accuracy": 0.9}), sst2
    # written before task_kind and the report: its class counts say classification; no confusion.json
    old = root / "old_sst2"
    write_lines(old / "predictions" / "dev.tsv", ["index\tprediction\tlabel", "0\tpos\tneg"])
    row = summary("sst2", None, old, {"accuracy": 0.0}, prediction_stats={"majority_rate": 1.0})
    runs["old_sst2"] = {k: v for k, v in row.items() if v is not None}, old  # no field of a later contract
    runs["stsb"] = summary("stsb", "regression", root / "stsb", {"pearson": 0.8}), root / "stsb"
    return runs


SST2_CONFUSION = {
    "level": "class",
    "labels": ["neg", "pos"],
    "matrix": [[1, 0], [1, 1]],
    "per_class": [
        {"label": "neg", "precision": 0.5, "recall": 1.0, "f1": 0.667, "support": 1},
        {"label": "pos", "precision": 1.0, "recall": 0.5, "f1": 0.667, "support": 2},
    ],
    "misclassified": [{"index": 1, "text": "fine", "gold": "pos", "predicted": "neg", "score": 0.8}],
    "errors": 1,
    "examples": 3,
}


@pytest.fixture()
def client_and_jobs(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from ptmlab.api.app import create_app
    from ptmlab.db import dispose_engines, migrate, session_scope
    from ptmlab.db.models import SUCCEEDED
    from ptmlab.queue import submit_job
    from ptmlab.results import new_result
    from ptmlab.settings import Settings

    url = f"sqlite:///{tmp_path / 'platform.db'}"
    migrate(url)
    ids = {}
    with session_scope(url) as s:
        for name, (row, run_dir) in seed_runs(tmp_path / "runs").items():
            job = submit_job(s, stage="finetune", overrides=[], queue="seeded")
            job.status, job.run_dir = SUCCEEDED, str(run_dir)
            s.add(new_result(row, job_id=job.id))
            ids[name] = job.id
        ids["sleep"] = submit_job(s, stage="sleep", overrides=[], queue="seeded").id
        s.commit()
    monkeypatch.setenv("PTMLAB_HOME", str(tmp_path / "home"))
    with TestClient(create_app(Settings(home=tmp_path / "home", database_url=url))) as client:
        yield client, ids
    dispose_engines()


def test_generation_samples_are_paged_source_reference_output(client_and_jobs):
    client, ids = client_and_jobs
    url = f"/api/v1/jobs/{ids['gen']}/predictions"
    first = client.get(url).json()
    assert (first["kind"], first["split"], first["splits"], first["total"]) == (
        "generation",
        "dev",
        ["dev", "test"],
        25,
    )
    assert [x["index"] for x in first["examples"]] == list(range(20))
    assert first["examples"][3] == {
        "index": 3,
        "id": "3",
        "source": "source 3 <b>",
        "references": ["ref 3", "other 3"],
        "output": "out 3",
    }
    rest = client.get(url, params={"offset": 20, "limit": 10}).json()
    assert [x["index"] for x in rest["examples"]] == [20, 21, 22, 23, 24]
    test = client.get(url, params={"split": "test"}).json()
    assert test["total"] == 1 and test["examples"][0]["references"] is None
    missing = client.get(url, params={"split": "train"})
    assert missing.status_code == 404 and "splits: dev, test" in missing.json()["error"]["message"]
    digest = client.get(f"/api/v1/views/jobs/{ids['gen']}").json()["results"][0]["digest"]
    rows = {r["name"]: r for r in digest["rows"]}
    assert digest["task_kind"] == "generation" and rows["decoding latency (ms per example)"]["value"] == 4.5
    assert rows["decoding latency (ms per example)"]["note"] == "strategy=beam, num_beams=4, max_new_tokens=64"
    assert rows["wmt16_en_ro bleu"]["value"] == 12.5


def test_span_answers_beside_gold_and_the_wrong_ones(client_and_jobs):
    client, ids = client_and_jobs
    url = f"/api/v1/jobs/{ids['span']}/predictions"  # a row from before task_kind: its no-answer threshold tells
    page = client.get(url).json()
    assert page["kind"] == "span_extraction" and page["split"] == "dev"
    assert [(x["prediction"], x["gold"], x["matches_gold"]) for x in page["examples"]] == [
        ("Denver Broncos", ["Denver Broncos", "the Broncos"], True),
        ("Carolina", ["Carolina Panthers"], False),
        ("", [], True),
    ]
    wrong = client.get(url, params={"errors_only": "true"}).json()
    assert wrong["total"] == 1 and [x["index"] for x in wrong["examples"]] == [1]


def test_tagged_sentences_mark_their_errors_in_conll_and_conllu_columns(client_and_jobs):
    client, ids = client_and_jobs
    page = client.get(f"/api/v1/jobs/{ids['ner']}/predictions").json()
    assert page["kind"] == "token_classification" and page["total"] == 2
    second = page["examples"][1]
    assert second["errors"] == 2 and [(w["word"], w["gold"], w["predicted"], w["error"]) for w in second["words"]] == [
        ("in", "O", "O", False),
        ("paris", "B-LOC", "O", True),
        ("today", "O", "B-PER", True),
    ]
    wrong = client.get(f"/api/v1/jobs/{ids['ner']}/predictions", params={"errors_only": True}).json()
    assert [x["index"] for x in wrong["examples"]] == [1]
    upos = client.get(f"/api/v1/jobs/{ids['upos']}/predictions").json()["examples"][0]["words"]
    assert [(w["word"], w["gold"], w["predicted"], w["error"]) for w in upos] == [
        ("Dogs", "NOUN", "NOUN", False),
        ("bark", "VERB", "NOUN", True),
    ]


def test_choices_and_what_is_refused(client_and_jobs):
    client, ids = client_and_jobs
    page = client.get(f"/api/v1/jobs/{ids['choice']}/predictions").json()
    assert [(x["prediction"], x["label"], x["correct"]) for x in page["examples"]] == [(1, 1, True), (0, 1, False)]
    assert page["confusion"] is None  # the run wrote no report
    stsb = client.get(f"/api/v1/jobs/{ids['stsb']}/predictions")
    assert stsb.status_code == 404 and "stsb (regression) has no prediction samples" in stsb.json()["error"]["message"]
    sleep = client.get(f"/api/v1/jobs/{ids['sleep']}/predictions")
    assert sleep.status_code == 404 and f"job {ids['sleep']} has no finetune result" in sleep.json()["error"]["message"]
    assert client.get("/api/v1/jobs/99999/predictions").status_code == 404
    for bad in ("limit=0", "limit=201", "offset=-1", "split=../x", "split=dev.jsonl"):
        assert client.get(f"/api/v1/jobs/{ids['gen']}/predictions?{bad}").status_code == 422, bad


def test_a_classification_job_serves_its_predictions_and_confusion_report(client_and_jobs, tmp_path):
    client, ids = client_and_jobs
    url = f"/api/v1/jobs/{ids['sst2']}/predictions"
    page = client.get(url).json()
    assert (page["kind"], page["split"], page["splits"], page["total"]) == ("classification", "dev", ["dev"], 3)
    assert [(x["index"], x["id"], x["prediction"], x["label"], x["correct"]) for x in page["examples"]] == [
        (0, "0", "pos", "pos", True),
        (1, "1", "neg", "pos", False),
        (2, "2", "neg", "neg", True),
    ]
    assert page["confusion"] == SST2_CONFUSION
    wrong = client.get(url, params={"errors_only": True}).json()
    assert wrong["total"] == 1 and [x["index"] for x in wrong["examples"]] == [1]
    old = client.get(f"/api/v1/jobs/{ids['old_sst2']}/predictions").json()
    assert old["kind"] == "classification" and old["examples"][0]["correct"] is False and old["confusion"] is None
    # stage.write_predictions=false: no predictions file, the report alone; without either, no
    # example and why (the job page asks without naming a split); a split asked for by name: a 404
    predictions = tmp_path / "runs" / "sst2" / "predictions"
    (predictions / "dev.tsv").unlink()
    alone = client.get(url).json()
    assert alone["total"] == 0 and alone["examples"] == [] and alone["split"] is None
    assert alone["confusion"]["matrix"] == [[1, 0], [1, 1]]
    (predictions / "confusion.json").unlink()
    bare = client.get(url).json()
    assert bare["examples"] == [] and bare["confusion"] is None and "no predictions file under" in bare["missing"]
    assert client.get(url, params={"split": "dev"}).status_code == 404

"""conf/pipeline/tasks_survey.yaml (issue 23): two pre-training objectives -> WNUT-17, SQuAD, COPA,
BoolQ -> int8 -> leaderboards. The shipped sizes compose (tests/platform/test_queue_pipelines.py
composes every job of every shipped pipeline); here the same spec with its size vars made tiny runs
through a real warm-start worker, every job succeeds, each edge is the lineage the spec names, and
`ptmlab results tasks` / `superglue` / `compression` hold a row per objective with the survey's tasks.
The weights do not matter: nothing here asserts a score, only that each stage ran on the head kinds it takes."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

import pytest

from ptmlab import queue
from ptmlab.db import SUCCEEDED, dispose_engines, get_sessionmaker, migrate
from ptmlab.queue.pipelines import load_pipeline

pytestmark = pytest.mark.slow  # 18 jobs through one worker

# the smallest version: 20 pre-training steps on one short book, a few fine-tuning steps per task
TINY = {
    "pretrain_steps": ["20"],
    "corpus_files": ["shakespeare-macbeth.txt"],
    "vocab_size": ["2000"],
    "train_rows": ["16"],
    "eval_rows": ["16"],
    "epochs": ["1"],
    "few_shot_epochs": ["1"],
    "squad_length": ["128"],
    "measure": ["{batch_sizes:[1],threads:[1],warmup:1,repeats:2}"],
}
OBJECTIVES = ["mlm", "mlm_span"]
TASKS = ["wnut17", "squad", "copa", "boolq"]
COMPRESSED = TASKS


@pytest.fixture(scope="module")
def finished_survey(tmp_path_factory):
    """(database URL, PTMLAB_HOME, {job name: (id, parent ids)}) once a real worker has run the tiny survey."""
    home = tmp_path_factory.mktemp("tasks_survey_home")
    url = f"sqlite:///{home / 'ptmlab.db'}"
    migrate(url)
    spec = load_pipeline("tasks_survey")
    assert set(TINY) <= set(spec["vars"]) and spec["vars"]["objective"] == OBJECTIVES
    spec["vars"].update(TINY)
    with get_sessionmaker(url)() as s:
        pipeline, jobs = queue.submit_pipeline(s, spec)
        lineage = {j.name: (j.id, list(j.parent_ids)) for j in jobs}
    env = {**os.environ, "PTMLAB_HOME": str(home), "PTMLAB_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    log = home / "worker.log"
    with open(log, "wb") as out:  # the warm-start launcher (the default): 18 jobs share one set of imports
        worker = subprocess.run(
            [
                sys.executable,
                "-m",
                "ptmlab.cli",
                "worker",
                "--lease-s",
                "10",
                "--poll-s",
                "0.2",
                "--cpu-slots",
                "2",
                "--burst",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=800,
        )
    assert worker.returncode == 0, log.read_text()[-3000:]
    with get_sessionmaker(url)() as s:
        done, total = queue.list_jobs(s, pipeline_id=pipeline.id)
        statuses = {j.name: j.status for j in done}
    dispose_engines()
    assert total == 18 and set(statuses.values()) == {SUCCEEDED}, (statuses, log.read_text()[-3000:])
    return url, home, lineage


def test_the_survey_is_one_dag_pretrain_finetune_compress(finished_survey):
    _, _, lineage = finished_survey
    expected = {}
    for objective in OBJECTIVES:
        expected[f"pretrain-{objective}"] = []
        for task in TASKS:
            expected[f"finetune-{objective}-{task}"] = [f"pretrain-{objective}"]
        for task in COMPRESSED:
            expected[f"compress-{objective}-{task}"] = [f"finetune-{objective}-{task}"]
    assert {name: [lineage[p][0] for p in parents] for name, parents in expected.items()} == {
        name: parent_ids for name, (_, parent_ids) in lineage.items()
    }


def results(url: str, capsys, *args: str) -> list[dict]:
    from ptmlab.cli import main

    with pytest.raises(SystemExit) as done:
        main(["results", *args, "--database-url", url, "--format", "csv"])
    out = capsys.readouterr()
    assert done.value.code == 0, out.err
    return list(csv.DictReader(io.StringIO(out.out)))


def test_the_leaderboards_hold_a_row_per_objective(finished_survey, capsys):
    url, _, _ = finished_survey
    tasks = results(url, capsys, "tasks")
    assert sorted(r["objective"] for r in tasks) == OBJECTIVES  # each fine-tune records its backbone's objective
    for row in tasks:
        assert row["model"] == "bert_tiny" and row["wnut17/n"] == "1" and row["squad_v1/n"] == "1"
        assert 0 <= float(row["squad_v1/f1/mean"]) <= 100 and 0 <= float(row["wnut17/entity_f1/mean"]) <= 100
    superglue = results(url, capsys, "superglue")
    assert sorted(r["objective"] for r in superglue) == OBJECTIVES
    for row in superglue:
        assert row["copa/n"] == "1" and row["boolq/n"] == "1" and row["superglue/average"]
    compressed = results(url, capsys, "compression")
    assert len(compressed) == 8 and {r["method"] for r in compressed} == {"quantize_dynamic"}
    assert {r["task"] for r in compressed} == {"wnut17", "squad_v1", "copa", "boolq"}
    assert all(float(r["size ratio"]) < 1 for r in compressed)

"""The robustness view (ptmlab.views.robustness, /api/v1/views/robustness, /robustness) and the
compression view's robustness axis, on hand-made jobs and results rows (the shape of the
robustness_compressed and robustness_adaptation pipelines; no training): the table's values and
recipe groups, what made each model, the pipeline filter, attack results joined to the right
compressed model and source whatever form the attack's `source` takes, unknown ids -> 404."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from ptmlab.contracts import AttackSummary, CompressSummary, FinetuneSummary
from ptmlab.contracts.summaries import Measurement
from ptmlab.db import session_scope
from ptmlab.db.models import SUCCEEDED, Pipeline
from ptmlab.queue import submit_job
from ptmlab.results import clear_cache, new_result
from ptmlab.views import compression_view
from ptmlab.views.robustness import robustness_view


def _finetune(adaptation: str, defence: dict | None = None) -> dict:
    return FinetuneSummary(
        seed=0,
        wall_time_s=1.0,
        model="minilm",
        objective="none",
        adaptation=adaptation,
        task="sst2",
        metrics={"accuracy": 0.9},
        main_metric="accuracy",
        main_score=0.9,
        train_time_s=1.0,
        steps=10,
        trainable_params=10,
        total_params=100,
        defence=defence,
    ).model_dump()


def _compress(method: str, source: str, score: float, size: int) -> dict:
    return CompressSummary(
        seed=0,
        wall_time_s=1.0,
        method=method,
        source_ref=source,
        task="sst2",
        compressed=Measurement(score=score, params=size, size_bytes=size, latency_ms=1.0),
        source=Measurement(score=0.9, params=100, size_bytes=400, latency_ms=2.0),
    ).model_dump(exclude_none=True)


def _attack(recipe: str, source: str, clean: float, under: float, success: float, ratio: float) -> dict:
    return AttackSummary(
        seed=0,
        wall_time_s=1.0,
        recipe=recipe,
        source=source,
        task="sst2",
        num_examples=200,
        constraints={},
        clean_accuracy=clean,
        accuracy_under_attack=under,
        success_rate=success,
        perturbed_word_ratio=ratio,
        queries=50.0,
        seconds_per_example=0.1,
    ).model_dump()


@pytest.fixture()
def seeded(db_url, tmp_path):
    clear_cache()
    ids, pipeline_ids = seed_robustness(db_url, tmp_path / "home")
    return db_url, ids, pipeline_ids


def seed_robustness(db_url: str, home) -> tuple[dict[str, int], dict[str, str]]:
    """Two pipelines: `compressed` (teacher, int8, student; the teacher and int8 attacked by two
    recipes, the student by one) and `adaptation` (full, FreeLB and LoRA fine-tunes, one recipe);
    returns job ids by name and pipeline ids by name."""
    ids: dict[str, int] = {}
    with session_scope(db_url) as s:
        pipes = {name: Pipeline(name=name, spec={}) for name in ("robustness_compressed", "robustness_adaptation")}
        s.add_all(pipes.values())
        s.flush()

        def job(name, stage, pipeline, overrides=()):
            j = submit_job(s, stage=stage, overrides=list(overrides), name=name, queue="seeded")
            j.status, j.pipeline_id = SUCCEEDED, pipes[pipeline].id
            j.run_dir = str(home / "jobs" / str(j.id) / "run")
            s.commit()
            ids[name] = j.id
            return j

        def result(name, summary):
            s.add(new_result(summary, job_id=ids[name]))
            s.commit()

        teacher = job("teacher", "finetune", "robustness_compressed", ["model=minilm"])
        int8 = job("teacher-int8", "compress", "robustness_compressed", ["compression=quantize_dynamic"])
        student = job("student", "compress", "robustness_compressed", ["compression=distill"])
        result("teacher", _finetune("full"))
        result("teacher-int8", _compress("quantize_dynamic", teacher.run_dir, 0.88, 100))
        result("student", _compress("distill", teacher.run_dir, 0.85, 200))
        attacks = [  # (job name, recipe, source as the attack job got it, clean, under, success, ratio)
            ("a-teacher-dwb-old", "deepwordbug", teacher.run_dir, 0.9, 0.5, 0.44, 0.1),  # replaced by the re-run
            ("a-teacher-dwb", "deepwordbug", teacher.run_dir, 0.9, 0.3, 0.66, 0.12),
            ("a-teacher-pwws", "pwws", teacher.run_dir + "/", 0.9, 0.2, 0.77, 0.08),
            ("a-int8-dwb", "deepwordbug", int8.run_dir + "/export/task_model", 0.88, 0.25, 0.71, 0.11),
            ("a-int8-pwws", "pwws", int8.run_dir, 0.88, 0.15, 0.83, 0.09),
            ("a-student-dwb", "deepwordbug", f"job:{student.id}", 0.85, 0.1, 0.88, 0.14),
        ]
        for name, recipe, source, *numbers in attacks:
            job(name, "attack", "robustness_compressed", [f"attack={recipe}"])
            result(name, _attack(recipe, source, *numbers))
        full = job("full", "finetune", "robustness_adaptation", ["model=minilm", "adaptation=full"])
        freelb = job(
            "freelb", "finetune", "robustness_adaptation", ["model=minilm", "adaptation=full", "defence=freelb"]
        )
        lora = job("lora", "finetune", "robustness_adaptation", ["model=minilm", "adaptation=lora"])  # no result row
        result("full", _finetune("full"))
        result("freelb", _finetune("full", defence={"name": "freelb", "adv_k": 2}))
        for name, model, under in (("a-full", full, 0.2), ("a-freelb", freelb, 0.4), ("a-lora", lora, 0.3)):
            job(name, "attack", "robustness_adaptation", ["attack=deepwordbug"])
            result(name, _attack("deepwordbug", model.run_dir, 0.9, under, 0.5, 0.1))
        pipeline_ids = {name: p.id for name, p in pipes.items()}
    return ids, pipeline_ids


def test_one_row_per_attacked_model_and_a_column_group_per_recipe(seeded):
    url, ids, pipes = seeded
    with session_scope(url) as s:
        view = robustness_view(s)
    assert view["recipes"] == ["deepwordbug", "pwws"] and view["result_count"] == 9
    rows = {r["label"]: r for r in view["rows"]}
    assert sorted(rows) == ["freelb", "full", "lora", "student", "teacher", "teacher-int8"]
    teacher = rows["teacher"]
    assert teacher["job_id"] == ids["teacher"] and teacher["clean_accuracy"] == pytest.approx(0.9)
    dwb, pwws = teacher["recipes"]["deepwordbug"], teacher["recipes"]["pwws"]
    # the later of two deepwordbug results on the teacher, counted
    assert (dwb["accuracy_under_attack"], dwb["success_rate"], dwb["perturbed_word_ratio"]) == (0.3, 0.66, 0.12)
    assert dwb["runs"] == 2 and dwb["attack_job"] == "a-teacher-dwb"
    assert (pwws["accuracy_under_attack"], pwws["success_rate"], pwws["runs"]) == (0.2, 0.77, 1)
    # the export folder and `job:<id>` forms of a reference find the same job as its run folder
    assert rows["teacher-int8"]["recipes"]["deepwordbug"]["accuracy_under_attack"] == 0.25
    assert list(rows["student"]["recipes"]) == ["deepwordbug"] and rows["student"]["job_id"] == ids["student"]
    # what made each model: a compress method, an adaptation, a defence (from the model's result
    # or, without one, from its job's overrides)
    assert rows["teacher-int8"]["made_by"]["method"] == "quantize_dynamic"
    assert rows["student"]["made_by"]["text"] == "compress: distill"
    assert rows["freelb"]["made_by"]["defence"] == "freelb" and rows["full"]["made_by"]["defence"] is None
    assert rows["freelb"]["made_by"]["text"] == "finetune (full) + freelb"
    assert rows["lora"]["made_by"]["adaptation"] == "lora"
    # the chart: a series per recipe over the table's models, None where a recipe did not attack
    chart = view["chart"]
    at = {m: i for i, m in enumerate(chart["models"])}
    assert chart["recipes"]["pwws"][at["student"]] is None and chart["recipes"]["pwws"][at["teacher"]] == 0.2
    assert chart["recipes"]["deepwordbug"][at["freelb"]] == 0.4 and chart["clean"][at["student"]] == 0.85
    assert {p["name"] for p in view["options"]["pipelines"]} == set(pipes)


def test_pipeline_filter_and_unknown_ids(seeded, tmp_path, monkeypatch):
    from ptmlab.api.app import create_app
    from ptmlab.settings import Settings

    url, ids, pipes = seeded
    monkeypatch.setenv("PTMLAB_HOME", str(tmp_path / "home"))
    client = TestClient(create_app(Settings(home=tmp_path / "home", database_url=url)))
    view = client.get(f"/api/v1/views/robustness?pipeline={pipes['robustness_adaptation']}").json()
    assert [r["label"] for r in view["rows"]] == ["full", "freelb", "lora"] and view["recipes"] == ["deepwordbug"]
    assert view["filters"]["pipeline"]["name"] == "robustness_adaptation"
    view = client.get(f"/api/v1/views/robustness?pipeline={pipes['robustness_compressed']}&task=sst2").json()
    assert [r["label"] for r in view["rows"]] == ["teacher", "teacher-int8", "student"]
    assert client.get("/api/v1/views/robustness?pipeline=nosuchpipe").status_code == 404
    assert client.get("/robustness?pipeline=nosuchpipe").status_code == 404
    assert client.get("/api/v1/views/robustness?pipeline=bad%20id").status_code == 422
    page = client.get(f"/robustness?pipeline={pipes['robustness_compressed']}")
    assert page.status_code == 200 and 'href="/robustness"' in page.text and "robustness.js" in page.text
    assert client.get("/static/js/robustness.js").status_code == 200


def test_compression_view_robustness_axis(seeded):
    url, ids, _ = seeded
    with session_scope(url) as s:
        view = compression_view(s)
    assert view["recipes"] == ["deepwordbug", "pwws"]
    points = {p["method"]: p for p in view["points"]}
    int8, student = points["quantize_dynamic"], points["distill"]
    # the int8 model was attacked by two recipes, each result joined to it (not to its source)
    assert {r: a["accuracy_under_attack"] for r, a in int8["robustness"].items()} == {"deepwordbug": 0.25, "pwws": 0.15}
    assert int8["robustness"]["pwws"]["job_id"] == ids["a-int8-pwws"]
    assert {r: a["accuracy_under_attack"] for r, a in student["robustness"].items()} == {"deepwordbug": 0.1}
    (reference,) = view["references"]
    assert {r: a["accuracy_under_attack"] for r, a in reference["robustness"].items()} == {
        "deepwordbug": 0.3,
        "pwws": 0.2,
    }
    # pwws never attacked the student: left out of that axis, counted
    assert view["robustness_missing"] == {"deepwordbug": 0, "pwws": 1}
    # fronts against accuracy under attack: the int8 model is smaller and more robust than the student
    assert view["robustness_fronts"]["deepwordbug"]["size_bytes"] == [int8["id"]]
    assert view["robustness_fronts"]["pwws"]["size_bytes"] == [int8["id"]]
    # a new attack result reaches the cached view
    with session_scope(url) as s:
        s.add(new_result(_attack("pwws", f"job:{ids['student']}", 0.85, 0.05, 0.9, 0.1)))
        s.commit()
        view = compression_view(s)
    assert view["robustness_missing"] == {"deepwordbug": 0, "pwws": 0}
    student = next(p for p in view["points"] if p["method"] == "distill")
    assert student["robustness"]["pwws"]["accuracy_under_attack"] == 0.05

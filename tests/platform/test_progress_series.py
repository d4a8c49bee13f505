"""One series per training: a job that trains twice (a distilled student, then its no-teacher
control) keeps the two trainings apart in its progress history, and the job page's progress
endpoint hands them out as two labelled series, each with its own steps (not one curve running
back from step 76 to step 25)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from lightning_modules.runtime.progress import ProgressReporter
from ptmlab.api.app import create_app
from ptmlab.contracts.progress import history_series, read_progress, thin_history
from ptmlab.db import dispose_engines, session_scope
from ptmlab.db.models import Job
from ptmlab.settings import Settings


def distill_like_run(run_dir) -> dict:
    """What stage=compress compression=distill compression.control=true writes: the student's
    training (76 steps), then the control's (25 steps), each through the `ctx.progress(step, total,
    metrics, prefix)` hook of compression/base.py `train_epochs`, wired as stages/compress.py wires it."""
    reporter = ProgressReporter(run_dir, every_s=0.0)
    hook = lambda step, total, metrics, series=None: reporter.update(step, total=total, metrics=metrics, series=series)
    reporter.phase("compressing (distill)")
    for prefix, total in (("distill", 76), ("control", 25)):
        for step in range(1, total + 1):
            logging_step = step % 25 == 0 or step == total
            hook(step, total, {"train/loss": 1.0 / step} if logging_step else {}, prefix)
    return read_progress(run_dir)


def test_two_trainings_become_two_labelled_series(tmp_path):
    progress = distill_like_run(tmp_path)
    series = history_series(progress["history"])
    assert [s["name"] for s in series] == ["distill", "control"]
    assert [s["label"] for s in series] == ["student (distillation)", "control run"]
    assert [[p["step"] for p in s["points"]] for s in series] == [[25, 50, 75, 76], [25]]
    assert all("series" not in p for s in series for p in s["points"])
    # each training's curve only goes forward
    for s in series:
        steps = [p["step"] for p in s["points"]]
        assert steps == sorted(steps)


def test_a_history_without_names_is_split_where_the_step_goes_back():
    # Histories stored before points carried a series name: the second training is still apart.
    history = [{"step": 25, "train/loss": 0.9}, {"step": 76, "train/loss": 0.5}, {"step": 25, "train/loss": 0.8}]
    series = history_series(history)
    assert [s["label"] for s in series] == ["training", "training (2)"]
    assert [[p["step"] for p in s["points"]] for s in series] == [[25, 76], [25]]


def test_thinning_keeps_every_training_s_first_and_last_point():
    history = [{"step": i, "series": "distill", "train/loss": 1.0} for i in range(1, 400)]
    history += [{"step": i, "series": "control", "train/loss": 1.0} for i in range(1, 3)]
    thinned = thin_history(history, limit=100)
    series = history_series(thinned)
    assert [s["name"] for s in series] == ["distill", "control"]
    assert series[0]["points"][0]["step"] == 1 and series[0]["points"][-1]["step"] == 399
    assert [p["step"] for p in series[1]["points"]] == [1, 2]


@pytest.fixture()
def client(tmp_path):
    settings = Settings(
        home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'platform.db'}", data_dir=tmp_path / "data"
    )
    with TestClient(create_app(settings)) as c:
        yield c, settings.resolved_database_url
    dispose_engines()


def test_the_progress_endpoint_gives_the_job_page_one_series_per_training(client, tmp_path):
    api, url = client
    job = api.post("/api/v1/jobs", json={"stage": "sleep", "overrides": ["stage.seconds=0.1"]})
    assert job.status_code == 201, job.text
    (tmp_path / "run").mkdir()
    progress = distill_like_run(tmp_path / "run")
    with session_scope(url) as session:  # what the worker stores at a heartbeat
        session.get(Job, job.json()["id"]).progress = progress
    body = api.get(f"/api/v1/jobs/{job.json()['id']}/progress").json()
    assert len(body["history"]) == 5 and {p["series"] for p in body["history"]} == {"distill", "control"}
    assert [(s["label"], [p["step"] for p in s["points"]]) for s in body["series"]] == [
        ("student (distillation)", [25, 50, 75, 76]),
        ("control run", [25]),
    ]


def test_thinning_keeps_every_validation_a_study_counts():
    # A fine-tune logs a point per training step; a study numbers a trial's validations by their
    # order in the history (ptmlab.studies.objective), so thinning must not drop one.
    from ptmlab.studies.objective import objective_points

    history: list[dict] = []
    for step in range(1, 1201):
        point = {"step": step, "series": "training", "train/loss": 1 / step}
        if step % 100 == 0:
            point["val/acc"] = step / 1200
        history = thin_history([*history, point], limit=100)
    assert len(history) <= 100
    assert objective_points({"history": history}, "val/acc") == [(s, s / 1200) for s in range(100, 1201, 100)]
    # Validations alone past half the limit are thinned with the rest: the history stays bounded.
    many = [{"step": i, "series": "training", "val/acc": 0.5} for i in range(1, 301)]
    assert len(thin_history(many, limit=100)) <= 151

"""The recipe through the platform: the submit form's preview route answers the values a job will
use and where each comes from, refuses what does not compose, and a sweep's job is told which
keys its sweep varies (so its recipe names them `sweep`)."""

from __future__ import annotations

from test_api import API, client
from test_queue import claim, session

from ptmlab import queue


def test_the_preview_answers_the_recipe_and_each_origin_and_queues_nothing(client):
    body = {"stage": "finetune", "overrides": ["model=minilm", "task=ner/wnut17", "stage.lr=1e-4"]}
    recipe = client.post(f"{API}/jobs/recipe", json=body).json()
    assert recipe["name"] == "token_classification" and recipe["requested"] == "auto"
    assert recipe["values"]["stage.lr"] == {"value": 1e-4, "origin": "override"}
    assert recipe["values"]["stage.batch_size"] == {"value": 16, "origin": "recipe:token_classification"}
    none = client.post(f"{API}/jobs/recipe", json={"stage": "sleep", "overrides": []}).json()
    assert none == {"name": "none", "requested": "auto", "values": {}}
    bad = client.post(f"{API}/jobs/recipe", json={"stage": "finetune", "overrides": ["task=glue/rte", "recipe=nope"]})
    assert bad.status_code == 422 and "recipe/nope" in bad.json()["error"]["message"]
    assert client.get(f"{API}/jobs").json()["total"] == 0


def test_a_sweeps_job_is_told_the_keys_its_sweep_varies(session):
    jobs = [{"stage": "sleep", "overrides": ["stage.seconds=0.1", f"stage.lr={lr}"]} for lr in (1e-4, 3e-4)]
    queue.submit_sweep(session, jobs, spec={"overrides": ["stage.seconds=0.1", "stage.lr=1e-4,3e-4", "seed=1,2"]})
    assert claim(session).varied_keys == ["seed", "stage.lr"]
    queue.submit_sweep(session, jobs, spec={"jobs": [j["overrides"] for j in jobs]})
    queue.submit_job(session, stage="sleep", overrides=["stage.seconds=0.1"])
    assert claim(session).varied_keys == ["seed", "stage.lr"]  # the first sweep's second job
    assert claim(session).varied_keys == ["stage.lr"]


def test_an_override_that_interpolates_the_config_still_runs(tmp_path):
    """The recipe reads the run's overrides unresolved: `${paths.conf_dir}` in one (the demo's probe
    jobs name their data so) is the job config's, which Hydra's own node cannot resolve."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptmlab.run",
            "stage=sleep",
            "stage.seconds=0",
            "+tags.where=${paths.conf_dir}/x",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_leaderboard_row_spans_tasks_whose_recipes_differ_but_not_a_users_setting():
    """A configuration's row holds each task it ran: a value the task family's recipe supplied
    (token classification's batch 16 beside classification's 32) does not split it; one the
    user set does."""
    from ptmlab.leaderboard.grouping import task_dependent_keys

    sst2 = {
        "task.name": "sst2",
        "stage.batch_size": 32,
        "stage.lr": 5e-5,
        "recipe.name": "sequence_classification",
        "recipe.origin.stage.batch_size": "recipe:sequence_classification",
        "recipe.origin.stage.lr": "override",
    }
    assert task_dependent_keys(sst2) == {
        "task.name",
        "recipe.name",
        "recipe.origin.stage.batch_size",
        "recipe.origin.stage.lr",
        "stage.batch_size",
    }

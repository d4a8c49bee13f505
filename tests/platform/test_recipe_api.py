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

"""Bounded work and bounded fields (issue 41, defects 6 and 7): a study of 1,000 parallel trials
ran ~9 minutes in the API and grew it by 800 MB; out-of-range job options were a 500
(`OverflowError` for priority 2**70, seed 2**40, Infinity timeouts, pipeline priority 1e30 or
"abc") or were queued (job_seed 2**40, gpus 1e9, a NUL in a study name, max_attempts 1e9, a
5,000-character job name, a queue given as a list); a study stored with an Infinity timeout made
its views a 500 on every request. One schema now bounds every job option wherever a job is
described (jobs, sweeps, pipelines' jobs, studies' trials, the local `submit_job`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from ptmlab import queue
from ptmlab.api.app import create_app
from ptmlab.db import Job, Study, dispose_engines, session_scope
from ptmlab.errors import ConfigError
from ptmlab.queue.pipelines import list_pipelines
from ptmlab.settings import Settings

API = "/api/v1"
STUDY = {
    "stage": "sleep",
    "objective": "val/score",
    "overrides": ["stage.validations=2", "stage.quality=interval(0.01,1)"],
}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bounded")


@pytest.fixture(scope="module")
def client(home):
    # Server errors come back as responses (a 500 is what these tests look for), not raised.
    settings = Settings(home=home / "home", database_url=f"sqlite:///{home / 'platform.db'}", data_dir=home / "data")
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c
    dispose_engines()


def post_json(client, path: str, body: dict):
    """The body as Python's json writes it: Infinity and NaN included, as a hostile client may send."""
    return client.post(f"{API}{path}", content=json.dumps(body), headers={"content-type": "application/json"})


def totals(client) -> tuple[int, int]:
    return client.get(f"{API}/jobs").json()["total"], client.get(f"{API}/studies").json()["total"]


def assert_refused(client, r, field: str, before: tuple[int, int]) -> None:
    assert r.status_code == 422, (r.status_code, r.text[:300])
    message = r.json()["error"]["message"]
    assert field in message and "\n" not in message, message
    assert totals(client) == before, "nothing may be queued by a refused request"


# -- defect 6: a study's work is bounded ----------------------------------------------------------


def test_a_1000_parallel_study_is_refused_and_creation_queues_only_n_parallel(client):
    schema = client.get("/openapi.json").json()["components"]["schemas"]["StudySpec"]["properties"]
    assert schema["n_parallel"]["maximum"] == 64 and schema["n_trials"]["maximum"] == 10_000
    before = totals(client)
    r = post_json(client, "/studies", {**STUDY, "n_trials": 1000, "n_parallel": 1000})
    assert_refused(client, r, "n_parallel", before)

    r = post_json(client, "/studies", {**STUDY, "n_trials": 1000, "n_parallel": 4})
    assert r.status_code == 201, r.text
    study = r.json()
    assert len(study["trials"]) == 4
    assert client.get(f"{API}/jobs").json()["total"] == before[0] + 4


# -- defect 7: every job option bounded, wherever a job is described ------------------------------

STUDY_CASES = {
    "priority 2**70": ("priority", 2**70),
    "sampler seed 2**40": ("seed", 2**40),
    "job_seed 2**40": ("job_seed", 2**40),
    "gpus 1e9": ("gpus", 10**9),
    "NUL in the name": ("name", "a\x00b"),
    "control character in the name": ("name", "a\x1bb"),
    "queue as a list": ("queue", ["a"]),
    "Infinity timeout": ("timeout_s", float("inf")),
    "NaN timeout": ("timeout_s", float("nan")),
    "Infinity wall-clock budget": ("max_wall_s", float("inf")),
    "max_steps 2**70": ("max_steps", 2**70),
    "min_resource 2**70": ("min_resource", 2**70),
    "NUL in an override": ("overrides", ["stage.validations=2\x00", "stage.quality=interval(0.01,1)"]),
}


@pytest.mark.parametrize("case", list(STUDY_CASES))
def test_a_study_with_an_out_of_range_field_is_a_422_naming_it(client, case):
    field, value = STUDY_CASES[case]
    before = totals(client)
    assert_refused(client, post_json(client, "/studies", {**STUDY, field: value}), field, before)


PIPELINE_CASES = {
    "priority 1e30": ("priority", 1e30),
    "priority abc": ("priority", "abc"),
    "priority 2**70": ("priority", 2**70),
    "seed 2**40": ("seed", 2**40),
    "gpus 1e9": ("gpus", 10**9),
    "nodes 1e12": ("nodes", 10**12),
    "max_attempts 1e9": ("max_attempts", 10**9),
    "a 5,000-character name": ("name", "x" * 5000),
    "a control character in the name": ("name", "a\x07"),
    "queue as a list": ("queue", ["a"]),
    "Infinity timeout": ("timeout_s", float("inf")),
    "the string inf as a timeout": ("timeout_s", "inf"),
    "tags as a string": ("tags", "x"),
}


@pytest.mark.parametrize("case", list(PIPELINE_CASES))
def test_a_pipeline_job_with_an_out_of_range_option_is_a_422_naming_it(client, case):
    field, value = PIPELINE_CASES[case]
    before = totals(client)
    spec = {"name": "p", "jobs": [{"name": "a", "stage": "sleep", field: value}]}
    assert_refused(client, post_json(client, "/pipelines", {"spec": spec}), field, before)
    if field != "name":  # the same bound through the pipeline's `defaults`
        spec = {"name": "p", "defaults": {field: value}, "jobs": [{"name": "a", "stage": "sleep"}]}
        assert_refused(client, post_json(client, "/pipelines", {"spec": spec}), field, before)


def test_a_pipeline_job_with_yaml_style_options_is_still_queued(client):
    # `seed: "{seed}"` expands to a string (conf/pipeline/sleep_graph.yaml): numbers as text stay valid.
    spec = {
        "name": "ok",
        "vars": {"s": ["1", "2"]},
        "jobs": [
            {"name": "a-{s}", "stage": "sleep", "seed": "{s}", "priority": "5", "timeout_s": 60, "tags": {"k": "v"}}
        ],
    }
    r = post_json(client, "/pipelines", {"spec": spec})
    assert r.status_code == 201, r.text
    jobs = [client.get(f"{API}/jobs/{j['job_id']}").json() for j in r.json()["jobs"]]
    assert [(j["seed"], j["priority"], j["timeout_s"]) for j in jobs] == [(1, 5, 60.0), (2, 5, 60.0)]


def test_every_shipped_pipeline_file_still_expands():
    for name in list_pipelines():
        assert queue.expand_pipeline(name), name


JOB_CASES = {
    "a control character in the name": ("name", "a\x01b"),
    "Infinity timeout": ("timeout_s", float("inf")),
    "priority 2**70": ("priority", 2**70),
    "seed 2**40": ("seed", 2**40),
    "gpus 1e9": ("gpus", 10**9),
    "max_attempts 1e9": ("max_attempts", 10**9),
    "queue as a list": ("queue", ["a"]),
}


@pytest.mark.parametrize("case", list(JOB_CASES))
def test_jobs_and_sweeps_take_the_same_bounds(client, case):
    field, value = JOB_CASES[case]
    before = totals(client)
    job = {"stage": "sleep", "overrides": ["stage.seconds=0.1"], field: value}
    assert_refused(client, post_json(client, "/jobs", job), field, before)
    sweep = {"overrides": ["stage=sleep", "stage.seconds=0.1,0.2"], field: value}
    assert_refused(client, post_json(client, "/sweeps", sweep), field, before)


def test_a_job_label_with_a_control_character_is_refused(client):
    job = post_json(client, "/jobs", {"stage": "sleep"}).json()
    r = client.patch(f"{API}/jobs/{job['id']}", json={"name": "bad\x1bname"})
    assert r.status_code == 422 and "name" in r.json()["error"]["message"], r.text


def test_the_openapi_schema_states_the_bounds(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for model, seed in (("JobSubmit", "seed"), ("StudySpec", "job_seed")):
        props = schemas[model]["properties"]
        text = json.dumps(props)
        assert '"maximum": 64' in json.dumps(props["gpus"]), (model, props["gpus"])
        assert '"maximum": 1000' in json.dumps(props["priority"]), (model, props["priority"])
        assert '"maximum": 2147483647' in json.dumps(props[seed]), (model, props[seed])
        assert "queue" in props and "timeout_s" in props, text[:200]


@pytest.mark.parametrize(
    "field, value",
    [
        ("priority", 2**70),
        ("seed", 2**40),
        ("gpus", 10**9),
        ("timeout_s", float("inf")),
        ("max_attempts", 10**9),
        ("name", "x" * 5000),
        ("name", "a\x00b"),
        ("queue", ["a"]),
        ("nodes", 0),
    ],
)
def test_the_local_submit_path_refuses_the_same_values_naming_the_field(home, client, field, value):
    url = f"sqlite:///{home / 'platform.db'}"
    with session_scope(url) as s:
        before = s.scalar(sa.select(sa.func.count()).select_from(Job))
        with pytest.raises(ConfigError) as refused:
            queue.submit_job(s, stage="sleep", **{field: value})
        assert str(refused.value).startswith(f"{field}:") and "\n" not in str(refused.value), str(refused.value)
        s.rollback()
        assert s.scalar(sa.select(sa.func.count()).select_from(Job)) == before


# -- a study stored before the bounds --------------------------------------------------------------


def test_a_stored_infinite_timeout_does_not_break_the_study_views(home, client):
    r = post_json(client, "/studies", {**STUDY, "n_trials": 4, "n_parallel": 1, "timeout_s": 60})
    assert r.status_code == 201, r.text
    study_id = r.json()["id"]
    url = f"sqlite:///{home / 'platform.db'}"
    with session_scope(url) as s:  # what an older version let in
        spec = dict(s.get(Study, study_id).spec)
        s.execute(
            sa.update(Study)
            .where(Study.id == study_id)
            .values(spec={**spec, "timeout_s": float("inf"), "max_wall_s": float("inf")})
        )
    for path in (
        f"{API}/views/studies/{study_id}",
        f"{API}/studies/{study_id}",
        f"{API}/studies",
        f"/studies/{study_id}",
        "/studies",
    ):
        r = client.get(path)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
    assert client.get(f"{API}/studies/{study_id}").json()["spec"]["timeout_s"] is None

    from ptmlab import studies

    with session_scope(url) as s:  # the driver goes on with it: no timeout, as Infinity meant
        studies.advance_study(s, study_id, url=url, driver_id="test")
        assert studies.get_study(s, study_id).status == "running"


def test_a_stored_study_whose_trials_cannot_be_queued_stops_saying_why(home, client):
    r = post_json(client, "/studies", {**STUDY, "n_trials": 4, "n_parallel": 1})
    assert r.status_code == 201, r.text
    study_id = r.json()["id"]
    url = f"sqlite:///{home / 'platform.db'}"
    with session_scope(url) as s:  # what an older version let in: a trial no worker could ever claim
        spec = dict(s.get(Study, study_id).spec)
        s.execute(sa.update(Study).where(Study.id == study_id).values(spec={**spec, "gpus": 10**9, "n_parallel": 2}))
        before = s.scalar(sa.select(sa.func.count()).select_from(Job))

    from ptmlab import studies

    with session_scope(url) as s:
        studies.advance_study(s, study_id, url=url, driver_id="test")
        study = studies.get_study(s, study_id)
        assert study.status == "stopped" and "gpus" in study.stop_reason, (study.status, study.stop_reason)
        assert s.scalar(sa.select(sa.func.count()).select_from(Job)) == before
    assert client.get(f"{API}/views/studies/{study_id}").status_code == 200

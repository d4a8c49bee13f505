"""The checks a submission meets before anything is queued (issue 42 item 6): the API and the
dashboard's submit form send the same request, and a job that could not run is refused with one
line naming the key, and the queue stays empty."""

from __future__ import annotations

import pytest

from tests.platform.test_api import API, make_client

REFUSED = [
    ({"stage": "finetune", "overrides": ["stage.lr=1e-4"]}, "task"),
    ({"stage": "finetune", "overrides": ["task=glue/nope"]}, "task"),
    ({"stage": "finetune", "overrides": ["task=glue/sst2", "stage.lrr=1e-4"]}, "stage.lrr"),
    ({"stage": "finetune", "overrides": ["task=glue/sst2", "stage.epochs=-1"]}, "stage.epochs"),
]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from ptmlab.db import dispose_engines

    with make_client(tmp_path_factory.mktemp("preflight")) as c:
        yield c
    dispose_engines()


@pytest.mark.parametrize(("body", "key"), REFUSED, ids=[k for _, k in REFUSED])
def test_a_job_that_cannot_run_is_refused_in_one_line_naming_the_key(client, body, key):
    refused = client.post(f"{API}/jobs", json=body)
    assert refused.status_code == 422, refused.text
    message = refused.json()["error"]["message"]
    assert key in message and "\n" not in message, message
    assert client.get(f"{API}/jobs").json()["total"] == 0


def test_the_form_fields_become_overrides_that_pass_the_same_checks(client):
    """What the form sends for backbone, lr, epochs, batch size, seed, name and tags is queued as is."""
    body = {
        "stage": "finetune",
        "seed": 3,
        "name": "sst2-lr",
        "tags": {"suite": "glue"},
        "overrides": ["task=glue/sst2", "backbone=random", "stage.lr=1e-4", "stage.epochs=2", "stage.batch_size=16"],
    }
    queued = client.post(f"{API}/jobs", json=body)
    assert queued.status_code == 201, queued.text
    job = client.get(f"{API}/jobs/{queued.json()['id']}").json()
    assert job["seed"] == 3 and job["name"] == "sst2-lr" and job["tags"] == {"suite": "glue"}
    assert {"task=glue/sst2", "stage.lr=1e-4", "stage.batch_size=16"} <= set(job["overrides"])
    client.post(f"{API}/jobs/{job['id']}/cancel")

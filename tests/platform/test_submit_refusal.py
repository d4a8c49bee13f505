"""A job that cannot run is refused when it is submitted, not a second after a worker claims it
(issue 42): a fine-tune without a task is a 422 naming `task`, from the same compose-time check
`ptmlab run` meets, and nothing is queued."""

from __future__ import annotations

from tests.platform.test_api import API, make_client


def test_a_finetune_without_a_task_is_refused_and_nothing_is_queued(tmp_path):
    from ptmlab.config import compose_config
    from ptmlab.errors import ConfigError

    with make_client(tmp_path) as client:
        refused = client.post(f"{API}/jobs", json={"stage": "finetune", "overrides": ["stage.lr=1e-4"]})
        assert refused.status_code == 422
        message = refused.json()["error"]["message"]
        assert "stage=finetune needs a task" in message and "\n" not in message
        assert client.get(f"{API}/jobs").json()["total"] == 0
        queued = client.post(f"{API}/jobs", json={"stage": "finetune", "overrides": ["task=glue/sst2"]})
        assert queued.status_code == 201, queued.text
    try:
        compose_config(["stage=finetune"])
    except ConfigError as exc:
        assert "stage=finetune needs a task" in str(exc)
    else:
        raise AssertionError("a fine-tune without a task composed")

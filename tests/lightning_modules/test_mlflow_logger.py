"""The stage's MLflow logger: what counts as "unreachable" (retried) and what does not (raised at
once), the retry budget, and queued metrics that all arrive, in a real MLflow store. The logger
against a real server killed and restarted mid-job: tests/platform/test_faults.py."""

from __future__ import annotations

import socket
import time

import pytest
from mlflow.tracking import MlflowClient

from lightning_modules.runtime.mlflow_logger import BufferedMLFlowLogger, is_unreachable, retry_while_unreachable


@pytest.fixture()
def dead_server(monkeypatch) -> str:
    """A loopback URL nobody listens on (connection refused), MLflow's own retries off."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_refused_connection_is_retried_until_the_budget_is_spent(dead_server):
    client = MlflowClient(tracking_uri=dead_server)
    calls = []

    def call():
        calls.append(time.monotonic())
        return client.get_experiment_by_name("x")

    with pytest.raises(Exception) as caught:
        retry_while_unreachable(call, retry_s=2.5, what="get_experiment_by_name")
    assert is_unreachable(caught.value), caught.value
    assert len(calls) >= 2 and str(dead_server) in str(caught.value)


def test_a_refused_request_is_not_retried(tmp_path):
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    calls = []

    def call():
        calls.append(1)
        return client.get_run("0" * 32)

    with pytest.raises(MlflowException) as caught:
        retry_while_unreachable(call, retry_s=60, what="get_run")
    assert not is_unreachable(caught.value) and calls == [1]


def test_queued_metrics_all_arrive_in_order_by_finalize(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    logger = BufferedMLFlowLogger(
        experiment_name="buffered", tracking_uri=uri, retry_s=5, artifact_location=(tmp_path / "artifacts").as_uri()
    )
    for step in range(250):
        logger.log_metrics({"train/loss": 1.0 / (step + 1), "train/lr": 0.1, "bad key!": 1.0}, step=step)
    logger.finalize("success")
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(logger.run_id)
    assert run.info.status == "FINISHED"
    history = client.get_metric_history(logger.run_id, "train/loss")
    assert [m.step for m in sorted(history, key=lambda m: m.step)] == list(range(250))
    assert {m.value for m in history} == {1.0 / (s + 1) for s in range(250)}
    assert {"train/loss", "train/lr", "bad key"} == set(run.data.metrics)  # MLflow's characters, as Lightning's


def test_a_job_that_loses_the_race_to_create_the_experiment_uses_the_winners(tmp_path, monkeypatch):
    """Two jobs started together on a store without their experiment: both look it up, find none,
    and create it; the second's create is refused (UNIQUE constraint). Here the first job's create
    has already happened when the second looks, but the second's look-up ran before it (patched to
    answer None once, as it did for an ASHA trial in CI): the second job runs in the first's
    experiment instead of failing."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    winner = MlflowClient(tracking_uri=uri).create_experiment("raced")
    logger = BufferedMLFlowLogger(
        experiment_name="raced", tracking_uri=uri, retry_s=5, artifact_location=(tmp_path / "artifacts").as_uri()
    )
    client = logger._mlflow_client._client  # the MlflowClient under the retrying wrapper
    looked = []
    real_lookup = client.get_experiment_by_name

    def stale_first_lookup(name):
        looked.append(name)
        return None if len(looked) == 1 else real_lookup(name)

    monkeypatch.setattr(client, "get_experiment_by_name", stale_first_lookup)
    logger.log_metrics({"train/loss": 1.0}, step=0)
    logger.finalize("success")
    run = MlflowClient(tracking_uri=uri).get_run(logger.run_id)
    assert run.info.experiment_id == winner and run.info.status == "FINISHED"
    assert looked == ["raced", "raced"]  # the stale look-up, then the one after the refused create

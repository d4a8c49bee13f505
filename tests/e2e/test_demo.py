"""`ptmlab demo` end to end on the embedded default: two MLflow runs (MLM encoder, causal
decoder) whose train/loss decreases, checked through the MLflow client."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_leaves_two_runs_with_decreasing_loss(ptmlab_home):
    env = {**os.environ, "PTMLAB_HOME": str(ptmlab_home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run([sys.executable, "-m", "ptmlab.cli", "demo", "--steps", "60"], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "mlflow ui --backend-store-uri" in proc.stdout and "127.0.0.1" in proc.stdout

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{ptmlab_home / 'mlflow.db'}")
    experiments = client.search_experiments()
    runs = client.search_runs([e.experiment_id for e in experiments], filter_string="tags.demo = 'true'")
    assert sorted(r.data.params["objective.name"] for r in runs) == ["clm", "mlm"]
    for run in runs:
        assert run.info.status == "FINISHED"
        history = sorted(client.get_metric_history(run.info.run_id, "train/loss"), key=lambda m: m.step)
        assert len(history) >= 3
        assert history[-1].value < history[0].value, (run.data.params["objective.name"], history)
        assert run.info.run_id in proc.stdout  # the final table names each run

    # The dashboard the demo points at shows its jobs and results (read through the API app).
    import re

    from fastapi.testclient import TestClient

    from ptmlab.api.app import create_app
    from ptmlab.settings import Settings

    job_ids = re.search(r"queued pipeline \w+: jobs (\d+) \(pretrain-mlm\), (\d+) \(pretrain-clm\)", proc.stdout)
    assert job_ids, proc.stdout[:2000]
    assert "Dashboard:" in proc.stdout and "http://127.0.0.1:" in proc.stdout
    with TestClient(create_app(Settings(home=ptmlab_home))) as client:
        results = client.get("/api/v1/results", params={"kind": "pretrain"}).json()
        assert {r["mlflow_run_id"] for r in results["results"]} == {r.info.run_id for r in runs}
        page = client.get("/").text
        assert "pretrain-mlm" in page and "pretrain-clm" in page

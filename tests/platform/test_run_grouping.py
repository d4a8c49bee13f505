"""Any config key as a column, a filter and a group (issue 42): a sweep of 2 learning rates × 3
seeds grouped by `stage.lr` gives each rate's mean ± std and n over its seeds, the same numbers
from the view, the API (`/api/v1/views/runs?group_by=stage.lr`) and the CLI (`ptmlab results runs
--group-by stage.lr`); a group pooling runs of different configs names the keys that differ; an
unknown key is refused naming it, with the key it most resembles; the leaderboard's rows-by takes
config keys."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from ptmlab.db import session_scope
from ptmlab.db.models import Job
from ptmlab.results import clear_cache, new_result
from ptmlab.views import runs_view

SCORES = {1e-4: (0.81, 0.83, 0.80), 1e-3: (0.62, 0.70, 0.66)}


def _summary(lr: float, seed: int, score: float, epochs: int = 3) -> dict:
    return {
        "stage": "finetune",
        "model": "bert_tiny",
        "objective": "mlm",
        "adaptation": "full",
        "task": "sst2",
        "seed": seed,
        "metrics": {"accuracy": score},
        "main_metric": "accuracy",
        "main_score": score,
        "baseline": {"metric": "accuracy", "value": 0.509},
        "hparams": {
            "stage.lr": lr,
            "stage.epochs": epochs,
            "stage.batch_size": 16,
            "model.name": "bert_tiny",
            "task.name": "sst2",
        },
    }


@pytest.fixture()
def sweep(tmp_path):
    url = f"sqlite:///{tmp_path / 'ptmlab.db'}"
    from ptmlab.db import migrate

    migrate(url)
    clear_cache()
    with session_scope(url) as s:
        for lr, scores in SCORES.items():
            for seed, score in enumerate(scores, start=1):
                job = Job(stage="finetune", name=f"lr{lr:g}-s{seed}", overrides=[f"stage.lr={lr}"], seed=seed)
                s.add(job)
                s.flush()
                s.add(new_result(_summary(lr, seed, score), job_id=job.id))
        # a run at the majority-class rate, of another epoch count
        job = Job(stage="finetune", name="stuck", overrides=[], seed=1)
        s.add(job)
        s.flush()
        s.add(new_result(_summary(1e-2, 1, 0.509, epochs=5), job_id=job.id))
    return url


def test_a_config_key_is_a_column_and_a_group_with_mean_std_and_n(sweep):
    with session_scope(sweep) as s:
        view = runs_view(s, columns=["main_score", "stage.lr"], sort="stage.lr", order="asc")
        assert [r["values"]["stage.lr"] for r in view["rows"]] == [1e-4] * 3 + [1e-3] * 3 + [1e-2]
        keys = {a["key"]: a for a in view["available"]}
        assert keys["stage.lr"]["source"] == "config" and keys["stage.lr"]["numeric"]
        assert keys["main_score"]["source"] == "summary" and view["rows"][0]["label"].endswith(")")
        assert runs_view(s, filters=["stage.lr=0.001"])["total"] == 3
        # the run at its task's majority-class rate is marked in the rows too, with the baseline
        stuck = [r for r in view["rows"] if r["values"]["stage.lr"] == 1e-2]
        assert [r["degenerate"] for r in stuck] == [{"baseline": 0.509, "metric": "accuracy"}]
        assert all(r["degenerate"] is None for r in view["rows"] if r not in stuck)
        grouped = runs_view(s, columns=["main_score"], group_by=["stage.lr"], sort="main_score")
    assert grouped["group_total"] == 3
    by_lr = {g["key"]["stage.lr"]: g for g in grouped["groups"]}
    for lr, scores in SCORES.items():
        stat = by_lr[lr]["values"]["main_score"]
        assert stat["n"] == by_lr[lr]["n"] == 3 and stat["mean"] == pytest.approx(statistics.fmean(scores))
        assert stat["std"] == pytest.approx(statistics.stdev(scores))
        assert (stat["min"], stat["max"]) == (min(scores), max(scores))
        assert by_lr[lr]["spread"] == "seeds" and by_lr[lr]["varying"] == [] and sorted(by_lr[lr]["seeds"]) == [1, 2, 3]
    assert [g["key"]["stage.lr"] for g in grouped["groups"]] == [1e-4, 1e-3, 1e-2]  # best mean first
    assert (by_lr[1e-2]["degenerate"], by_lr[1e-2]["baseline"], by_lr[1e-2]["baseline_metric"]) == (
        1,
        0.509,
        "accuracy",
    )
    assert (by_lr[1e-4]["degenerate"], by_lr[1e-4]["baseline"]) == (0, None)
    with session_scope(sweep) as s:
        pooled = runs_view(s, columns=["main_score"], group_by=["model"])
    (group,) = pooled["groups"]
    assert group["n"] == 7 and group["spread"] == "runs" and group["varying"] == ["stage.epochs", "stage.lr"]


def test_an_unknown_key_is_refused_naming_it(sweep):
    from ptmlab.errors import ConfigError

    with session_scope(sweep) as s:
        for what, kwargs in (
            ("column", {"columns": ["stage.lrr"]}),
            ("group_by", {"group_by": ["stage.lrr"]}),
            ("filter", {"filters": ["stage.lrr>1"]}),
            ("sort", {"sort": "stage.lrr"}),
        ):
            with pytest.raises(ConfigError, match=rf"^{what} 'stage.lrr' is in no run \(did you mean stage.lr"):
                runs_view(s, **kwargs)


def test_the_api_and_the_cli_give_the_pages_numbers(sweep, tmp_path):
    from ptmlab.api.app import create_app
    from ptmlab.settings import Settings

    with session_scope(sweep) as s:
        view = runs_view(s, columns=["main_score"], group_by=["stage.lr"], sort="main_score", limit=500)
    client = TestClient(create_app(Settings(home=tmp_path / "home", database_url=sweep)))
    body = client.get(
        "/api/v1/views/runs",
        params={"column": "main_score", "group_by": "stage.lr", "sort": "main_score", "limit": 500},
    ).json()
    assert body["groups"] == view["groups"]
    bad = client.get("/api/v1/views/runs", params={"group_by": "stage.lrr"})
    assert bad.status_code == 422 and "group_by 'stage.lrr' is in no run" in bad.json()["error"]["message"]
    board = client.get("/api/v1/views/leaderboard", params={"group_by": "model,stage.lr"}).json()
    cells = {r["label"]: r["cells"]["sst2"] for r in board["rows"]}
    assert cells["bert_tiny / 0.0001"]["n"] == 3 and cells["bert_tiny / 0.0001"]["mean"] == pytest.approx(
        100 * statistics.fmean(SCORES[1e-4])
    )
    assert cells["bert_tiny / 0.01"]["degenerate"] == {
        "baseline": pytest.approx(50.9),
        "metric": "accuracy",
        "kind": "majority_class",
        "runs": 1,
    }
    assert client.get("/api/v1/views/leaderboard", params={"group_by": "model,stage.lrr"}).status_code == 422

    cli = [sys.executable, "-m", "ptmlab.cli", "results", "runs", "--database-url", sweep]
    out = subprocess.run(
        [*cli, "--columns", "main_score", "--group-by", "stage.lr", "--sort", "main_score", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["groups"] == json.loads(json.dumps(view["groups"]))
    csv_out = subprocess.run(
        [*cli, "--columns", "main_score", "--group-by", "stage.lr", "--format", "csv"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.splitlines()
    assert csv_out[0] == "stage.lr,n,main_score,spread,runs" and csv_out[1].startswith(
        "0.0001,3,0.8133 ± 0.01528,std over 3 seeds,"
    )
    refused = subprocess.run([*cli, "--group-by", "stage.lrr"], capture_output=True, text=True, timeout=120)
    assert (
        refused.returncode == 2
        and refused.stderr.count("\n") == 1
        and "group_by 'stage.lrr' is in no run" in refused.stderr
    )

"""Issue 42's comparisons on synthetic rows in SQLite (no worker, no training): compare by job ids
answers first (the main score with Δ and Δ%, only the metrics and config keys that differ, 2-10
runs, each named by its job); a sweep's page gives each swept value's mean ± std over its seeds,
the best run marked degenerate at its majority-class baseline, a log axis where the values span
two decades; a leaderboard A/B exported to CSV and LaTeX states n and the test beside every
figure; the leaderboard command refuses a rows-by key no run has, in one line, exit 2."""

from __future__ import annotations

import statistics

import pytest
from fastapi.testclient import TestClient

from ptmlab.db import session_scope
from ptmlab.db.models import Job, Sweep
from ptmlab.results import clear_cache, new_result

SWEEP = {1e-5: (0.509, 0.509, 0.509), 1e-4: (0.81, 0.83, 0.80), 1e-3: (0.62, 0.70, 0.66)}  # lr -> score per seed
BASELINE = 0.509  # SST-2's majority-class accuracy


def _summary(lr: float, seed: int, score: float, model: str = "bert_tiny", epochs: int = 3) -> dict:
    return {
        "stage": "finetune",
        "model": model,
        "objective": "mlm",
        "adaptation": "full",
        "task": "sst2",
        "seed": seed,
        "metrics": {"accuracy": score, "f1": round(score - 0.01, 4), "loss": 0.5},
        "main_metric": "accuracy",
        "main_score": score,
        "baseline": {"kind": "majority_class", "metric": "accuracy", "value": BASELINE},
        "hparams": {"stage.lr": lr, "stage.epochs": epochs, "model.name": model, "task.name": "sst2"},
    }


@pytest.fixture()
def db(tmp_path):
    """A sweep of 3 learning rates × 3 seeds (the smallest at the baseline), each run a job with a
    result; and 3 seeds of gpt_tiny outside the sweep."""
    from ptmlab.db import migrate

    url = f"sqlite:///{tmp_path / 'ptmlab.db'}"
    migrate(url)
    clear_cache()
    jobs: dict[tuple, int] = {}
    with session_scope(url) as s:
        s.add(Sweep(id="lrsweep", name="lr sweep", spec={}, job_count=9))
        s.flush()
        for lr, scores in SWEEP.items():
            for seed, score in enumerate(scores, start=1):
                job = Job(
                    stage="finetune",
                    name=None if seed > 1 else f"lr{lr:g}",
                    sweep_id="lrsweep",
                    seed=seed,
                    overrides=["task=glue/sst2", f"stage.lr={lr}"],
                    status="succeeded",
                )
                s.add(job)
                s.flush()
                s.add(new_result(_summary(lr, seed, score), job_id=job.id, sweep_id="lrsweep"))
                jobs[("bert_tiny", lr, seed)] = job.id
        for seed, score in enumerate((0.74, 0.78, 0.75), start=1):
            job = Job(stage="finetune", seed=seed, overrides=["model=gpt_tiny"], status="succeeded")
            s.add(job)
            s.flush()
            s.add(new_result(_summary(1e-4, seed, score, model="gpt_tiny"), job_id=job.id))
            jobs[("gpt_tiny", 1e-4, seed)] = job.id
    return url, jobs


def _client(url, tmp_path):
    from ptmlab.api.app import create_app
    from ptmlab.settings import Settings

    return TestClient(create_app(Settings(home=tmp_path / "home", database_url=url)))


def test_compare_by_job_ids_answers_first(db, tmp_path):
    url, jobs = db
    client = _client(url, tmp_path)
    picked = [jobs[("bert_tiny", 1e-4, 1)], jobs[("bert_tiny", 1e-3, 2)], jobs[("bert_tiny", 1e-5, 3)]]
    view = client.get("/api/v1/views/compare", params={"jobs": ",".join(map(str, picked))}).json()
    assert [r["job_id"] for r in view["runs"]] == picked
    assert [r["label"] for r in view["runs"]] == [f"lr0.0001 (#{picked[0]})", f"#{picked[1]}", f"#{picked[2]}"]
    assert view["main"]["metric"] == "accuracy" and view["main"]["values"] == [0.81, 0.70, 0.509]
    assert view["main"]["delta"] == pytest.approx([0.0, -0.11, -0.301])
    assert view["main"]["delta_pct"] == pytest.approx([0.0, -100 * 0.11 / 0.81, -100 * 0.301 / 0.81])
    # only the numbers that differ, the main metric's first; the loss (0.5 everywhere) is not one
    keys = [m["key"] for m in view["metrics"]]
    assert keys[0] in ("main_score", "metrics.accuracy") and "metrics.f1" in keys and "metrics.loss" not in keys
    # the config keys that differ (the summary's config keys: no run folder), then every key
    assert [k["key"] for k in view["config_diff"]["keys"]] == ["seed", "stage.lr"]
    assert view["config_diff"]["keys"][1]["values"] == [1e-4, 1e-3, 1e-5]
    assert view["config_diff"]["total"] == len(view["config_all"]) == 5 and view["config_diff"]["differing"] == 2
    assert {r["config_source"] for r in view["runs"]} == {"summary"}
    # the run at its majority-class baseline is marked, with the baseline
    assert [r["degenerate"] for r in view["runs"]] == [
        None,
        None,
        {"baseline": BASELINE, "metric": "accuracy", "kind": "majority_class"},
    ]
    assert all("result" not in r["label"] for r in view["runs"])
    eleven = ",".join(str(j) for j in list(jobs.values())[:11])
    refused = client.get("/api/v1/views/compare", params={"jobs": eleven})
    assert refused.status_code == 422 and "at most 10 runs" in refused.json()["error"]["message"]


def test_a_sweeps_values_over_their_seeds_and_a_degenerate_best(db, tmp_path):
    from ptmlab.views.sweep import sweep_view

    url, jobs = db
    with session_scope(url) as s:
        view = sweep_view(s, "lrsweep")
    assert view["metric"] == "accuracy" and view["maximize"] is True and view["baseline"] == BASELINE
    assert view["params"] == [{"key": "stage.lr", "values": [1e-5, 1e-4, 1e-3], "log_scale": True}]
    per_value = {v["value"]: v for v in view["per_value"]["stage.lr"]}
    for lr, scores in SWEEP.items():
        entry = per_value[lr]
        assert entry["n"] == 3 and entry["mean"] == pytest.approx(statistics.fmean(scores))
        assert entry["std"] == pytest.approx(statistics.stdev(scores)) and entry["spread"] == "seeds"
        assert (entry["min"], entry["max"]) == (min(scores), max(scores))
        assert sorted(entry["job_ids"]) == sorted(jobs[("bert_tiny", lr, seed)] for seed in (1, 2, 3))
    assert per_value[1e-5]["degenerate"] == 3 and per_value[1e-5]["baseline"] == BASELINE
    assert per_value[1e-4]["degenerate"] == 0
    assert view["best"]["job_id"] == jobs[("bert_tiny", 1e-4, 2)] and view["best"]["degenerate"] is False
    assert view["best_config"]["params"] == {"stage.lr": 1e-4} and view["best_config"]["n"] == 3
    assert view["top_job_ids"][:3] == [jobs[("bert_tiny", 1e-4, seed)] for seed in (2, 1, 3)]
    assert {r["seed"] for r in view["runs"]} == {1, 2, 3} and len(view["runs"]) == 9
    # the view is kept while nothing changes, and a job's new state shows at once
    with session_scope(url) as s:
        assert sweep_view(s, "lrsweep") is sweep_view(s, "lrsweep")
        s.get(Job, jobs[("bert_tiny", 1e-3, 3)]).status = "failed"
    with session_scope(url) as s:
        statuses = {r["job_id"]: r["status"] for r in sweep_view(s, "lrsweep")["runs"]}
    assert statuses[jobs[("bert_tiny", 1e-3, 3)]] == "failed" and statuses[jobs[("bert_tiny", 1e-3, 2)]] == "succeeded"
    # the API answers the same, under the contract's path and the page's
    client = _client(url, tmp_path)
    assert (
        client.get("/api/v1/views/sweep/lrsweep").json()["per_value"]
        == client.get("/api/v1/views/sweeps/lrsweep").json()["per_value"]
    )
    assert client.get("/api/v1/views/sweep/nosuch").status_code == 404


def test_a_sweep_whose_runs_all_sit_at_the_baseline_has_a_degenerate_best(db):
    from ptmlab.views.sweep import param_view

    runs = [
        {
            "job_id": i,
            "label": f"#{i}",
            "seed": i,
            "status": "succeeded",
            "params": {"stage.lr": lr},
            "score": 0.509,
            "baseline": BASELINE,
            "degenerate": True,
            "metric": "accuracy",
            "config_hash": None,
        }
        for i, lr in enumerate((1e-4, 1e-3, 1e-4))
    ]
    view = param_view(runs, ["stage.lr"], metric="accuracy", maximize=True)
    assert view["best"]["degenerate"] is True and view["best"]["baseline"] == BASELINE and view["all_degenerate"]
    assert view["params"][0]["log_scale"] is False  # one decade: a linear axis


def test_a_leaderboard_ab_export_states_n_and_the_test(db, tmp_path):
    url, _ = db
    client = _client(url, tmp_path)
    params = {"a": "bert_tiny / 0.0001", "b": "gpt_tiny / 0.0001", "group_by": "model,stage.lr"}
    view = client.get("/api/v1/views/leaderboard/compare", params=params).json()
    (sst2,) = [c for c in view["comparisons"] if c["task"] == "sst2"]
    assert sst2["test"] == "paired t-test" and sst2["paired_seeds"] == [1, 2, 3] and sst2["a_n"] == sst2["b_n"] == 3
    csv_text = client.get("/api/v1/views/leaderboard/compare", params={**params, "format": "csv"}).text.splitlines()
    header = csv_text[0].split(",")
    row = dict(zip(header, csv_text[1].split(","), strict=True))
    assert (row["test"], row["a_n"], row["b_n"], row["paired_seeds"]) == ("paired t-test", "3", "3", "1 2 3")
    assert float(row["diff"]) == pytest.approx(
        100 * (statistics.fmean(SWEEP[1e-4]) - statistics.fmean((0.74, 0.78, 0.75))), abs=1e-4
    )
    latex = client.get("/api/v1/views/leaderboard/compare", params={**params, "format": "latex"}).text
    (sst2_line,) = [line for line in latex.splitlines() if line.startswith("SST-2")]
    assert "paired t-test" in sst2_line and sst2_line.count("(3)") == 2 and "[" in sst2_line
    # pooled rows (runs of 3 learning rates under one label): no interval and no p, the reason instead
    pooled_params = {"a": "bert_tiny", "b": "gpt_tiny", "group_by": "model", "pool": "true"}
    pooled = client.get("/api/v1/views/leaderboard/compare", params=pooled_params).json()
    (cell,) = [c for c in pooled["comparisons"] if c["task"] == "sst2"]
    assert cell["test"] is None and cell["p_value"] is None and cell["ci_low"] is None
    assert "A pools runs of different configs (stage.lr differ)" in cell["reason"] and cell["a_n"] == 9
    pooled_csv = client.get("/api/v1/views/leaderboard/compare", params={**pooled_params, "format": "csv"}).text
    fields = pooled_csv.splitlines()[1].split(",")
    assert fields[COLUMN("test")] == "" and fields[COLUMN("p_value")] == "" and fields[COLUMN("a_n")] == "9"
    assert "A pools runs of different configs" in fields[COLUMN("reason")]


def COLUMN(name: str) -> int:
    from ptmlab.leaderboard.rendering import COMPARISON_CSV

    return 2 + COMPARISON_CSV.index(name)


def test_the_leaderboard_command_refuses_an_unknown_rows_by_key(db, capsys):
    from ptmlab.cli import main

    url, _ = db
    with pytest.raises(SystemExit) as exit_:
        main(["results", "glue", "--database-url", url, "--group-by", "model", "stage.lrr"])
    err = capsys.readouterr().err
    assert (
        exit_.value.code == 2
        and err.count("\n") == 1
        and "--group-by 'stage.lrr' is in no run (did you mean stage.lr" in err
    )
    with pytest.raises(SystemExit) as exit_:
        main(["results", "glue", "--database-url", url, "--group-by", "model,stage.lr", "--format", "csv"])
    lines = capsys.readouterr().out.splitlines()
    assert exit_.value.code == 0 and lines[0].startswith("model,stage.lr,distinct,")
    assert sorted(line.split(",")[:2] for line in lines[1:]) == [
        ["bert_tiny", "0.0001"],
        ["bert_tiny", "0.001"],
        ["bert_tiny", "1e-05"],
        ["gpt_tiny", "0.0001"],
    ]


def test_the_runs_search_finds_a_sweep_by_name_and_a_tag(db):
    from ptmlab.views import runs_view

    url, jobs = db
    with session_scope(url) as s:
        s.add(new_result(_summary(1e-4, 4, 0.8), tags={"suite": "ablation"}))
    with session_scope(url) as s:
        assert runs_view(s, q="lr sweep")["total"] == 9  # the sweep's name, stored on the sweep, not the rows
        assert runs_view(s, q="suite=ablation")["total"] == 1
        assert runs_view(s, q="lr0.001")["rows"][0]["job_id"] == jobs[("bert_tiny", 1e-3, 1)]


def test_two_rows_compared_on_the_command_line(db, capsys):
    """n beside every mean, the test beside the interval and p, or why there is none."""
    from ptmlab.cli import main

    url, _ = db
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "results",
                "glue",
                "--database-url",
                url,
                "--group-by",
                "model,stage.lr",
                "--compare",
                "bert_tiny / 0.0001",
                "gpt_tiny / 0.0001",
            ]
        )
    (sst2,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("SST-2")]
    assert exit_.value.code == 0 and sst2.count("(n=3)") == 2 and sst2.endswith("paired t-test")
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "results",
                "glue",
                "--database-url",
                url,
                "--group-by",
                "model",
                "--pool",
                "--compare",
                "bert_tiny",
                "gpt_tiny",
                "--format",
                "latex",
            ]
        )
    latex = capsys.readouterr().out
    assert exit_.value.code == 0 and "A pools runs of different configs (stage.lr differ)" in latex and "(9)" in latex
    with pytest.raises(SystemExit) as exit_:
        main(["results", "glue", "--database-url", url, "--compare", "gpt_tiny / mlm / full", "nope"])
    assert exit_.value.code == 2 and "no leaderboard row 'nope'" in capsys.readouterr().err

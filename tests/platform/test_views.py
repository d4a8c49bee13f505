"""Dashboard view models and their endpoints (ptmlab.views, /api/v1/views, the pages), on SQLite
and PostgreSQL: the Pareto front against brute force, the leaderboard's cells and the runs behind
them, retention, probing aggregation, run comparison, empty databases, static files."""

from __future__ import annotations

import random

import pytest
from fastapi.testclient import TestClient
from synthetic_results import (
    SEED_COMPRESS,
    SEED_PROBE_MODELS,
    SEED_PROBE_TASKS,
    seed_dashboard,
    store_rows_from_before_schema_versions,
)

from ptmlab.db import session_scope
from ptmlab.results import clear_cache, new_result, parse_tag_filter
from ptmlab.views import compare_view, compression_view, leaderboard_view, pareto_front, probing_view

PAGES = [
    "/",
    "/jobs",
    "/submit",
    "/leaderboard",
    "/compression",
    "/robustness",
    "/probing",
    "/compare",
    "/compare?runs=1",
]


def brute_force_front(points, x, y="score"):
    usable = [p for p in points if p.get(x) is not None and p.get(y) is not None]
    return {
        p["id"]
        for p in usable
        if not any(q[x] <= p[x] and q[y] >= p[y] and (q[x] < p[x] or q[y] > p[y]) for q in usable)
    }


def test_pareto_front_is_exactly_the_non_dominated_points():
    rng = random.Random(3)
    for trial in range(200):
        n = rng.randint(0, 30)
        # Few distinct values: ties on x, on y and exact duplicates happen often.
        points = [
            {"id": i, "cost": rng.choice([1, 2, 3, 5, 8, None]), "score": rng.choice([0.1, 0.5, 0.7, 0.9, None])}
            for i in range(n)
        ]
        assert pareto_front(points, "cost") == brute_force_front(points, "cost"), (trial, points)


def test_pareto_front_hand_checked():
    points = [
        {"id": "a", "x": 1, "score": 0.5},
        {"id": "b", "x": 2, "score": 0.5},  # b: dominated by a
        {"id": "c", "x": 2, "score": 0.9},
        {"id": "d", "x": 3, "score": 0.9},  # d: dominated by c
        {"id": "e", "x": 1, "score": 0.5},
    ]  # e duplicates a: both stay
    assert pareto_front(points, "x") == {"a", "c", "e"}


@pytest.fixture()
def seeded(db_url):
    clear_cache()
    with session_scope(db_url) as s:
        ids = seed_dashboard(s)
    return db_url, ids


def test_leaderboard_view_cells_and_the_runs_behind_them(seeded):
    url, ids = seeded
    with session_scope(url) as s:
        view = leaderboard_view(s)
    rows = {tuple(r["config"].values()): r for r in view["rows"]}
    bert_full = rows[("bert_tiny", "mlm", "full")]
    sst2 = bert_full["cells"]["sst2"]
    assert sst2["n"] == 2 and sst2["mean"] == pytest.approx(83.0) and sst2["std"] == pytest.approx(1.41421, abs=1e-4)
    assert sorted(sst2["result_ids"]) == ids["results"]["finetune"][:2]
    # MRPC: the mean of F1 and accuracy; the GLUE average over the three tasks present.
    assert bert_full["cells"]["mrpc"]["mean"] == pytest.approx(75.0)
    assert bert_full["glue_average"] == pytest.approx((83.0 + 21.0 + 75.0) / 3) and bert_full["glue_tasks"] == 3
    assert rows[("bert_tiny", "mlm", "adapters")]["cells"]["cola"]["flags"]  # MCC = 0 is flagged
    assert [t["task"] for t in view["tasks"]] == ["cola", "sst2", "mrpc", "stsb", "rte"]
    assert view["options"]["tags"] == {"suite": ["glue"]}
    with session_scope(url) as s:
        assert leaderboard_view(s, tags={"suite": "nope"})["rows"] == []
        assert len(leaderboard_view(s, tags={"suite": "glue"})["rows"]) == 4


def test_compression_view_fronts_references_and_retention(seeded):
    url, ids = seeded
    with session_scope(url) as s:
        view = compression_view(s)
    assert view["task"] == "sst2" and len(view["points"]) == len(SEED_COMPRESS)
    assert view["methods"] == sorted({m for m, *_ in SEED_COMPRESS})
    for axis in ("params", "size_bytes", "latency_ms"):
        assert set(view["fronts"][axis]) == brute_force_front(view["points"], axis)
        assert all(p["pareto"][axis] == (p["id"] in view["fronts"][axis]) for p in view["points"])
    assert view["fronts"]["params"] != view["fronts"]["latency_ms"]  # the seeded data makes them differ
    (ref,) = view["references"]
    assert ref["source"] == "bert_tiny-sst2" and ref["params"] == 4_400_000 and ref["score"] == 0.88
    best = max(view["points"], key=lambda p: p["score"])
    assert best["retention"] == pytest.approx(best["score"] / 0.88)


def test_compression_uses_a_measured_source_run_for_retention(db_url):
    clear_cache()
    with session_scope(db_url) as s:
        s.add_all(
            [
                new_result(
                    {
                        "stage": "compress",
                        "method": "none",
                        "source": "m",
                        "task": "rte",
                        "score": 0.6,
                        "params": 100,
                        "size_bytes": 400,
                        "latency_ms": 2.0,
                    }
                ),
                new_result(
                    {
                        "stage": "compress",
                        "method": "prune",
                        "source": "m",
                        "task": "rte",
                        "score": 0.45,
                        "params": 50,
                        "size_bytes": 200,
                        "latency_ms": 1.5,
                    }
                ),
                new_result(
                    {
                        "stage": "compress",
                        "method": "prune",
                        "source": "m",
                        "task": "cola",
                        "score": 0.1,
                        "params": 50,
                        "size_bytes": 200,
                        "latency_ms": 1.5,
                    }
                ),
            ]
        )
        s.commit()
        view = compression_view(s, task="rte")
    assert view["tasks"] == ["cola", "rte"]
    (point,) = view["points"]
    assert point["retention"] == pytest.approx(0.75)
    assert [r["method"] for r in view["references"]] == ["none"]


def test_compression_points_name_their_source_job_and_only_the_settings_changed(db_url):
    from ptmlab.db.models import Job

    clear_cache()
    with session_scope(db_url) as s:
        teacher = Job(stage="finetune", name="teacher", overrides=[], run_dir="/runs/teacher/run")
        s.add(teacher)
        s.flush()
        base = {
            "stage": "compress",
            "task": "sst2",
            "score": 0.8,
            "params": 100,
            "size_bytes": 100,
            "source_params": 100,
            "source_size_bytes": 400,
            "source_score": 0.81,
        }
        s.add_all(
            [
                new_result(
                    {
                        **base,
                        "method": "quantize_dynamic",
                        "source": f"job:{teacher.id}",
                        "config": {"backend": "torch.ao", "embeddings": False, "finetune_epochs": 0, "lr": None},
                    }
                ),
                new_result(
                    {
                        **base,
                        "method": "prune_magnitude",
                        "source": "/runs/teacher/run",
                        "config": {"sparsity": 0.4, "new_key": 1},
                    }
                ),
                new_result({**base, "method": "low_rank", "source": "mlflow:abc123", "config": {}}),
            ]
        )
        s.commit()
        view = compression_view(s, task="sst2")
    by_method = {p["method"]: p for p in view["points"]}
    assert by_method["quantize_dynamic"]["source_label"] == "teacher (finetune)"
    assert by_method["prune_magnitude"]["source_label"] == "teacher (finetune)"  # its run folder
    assert by_method["low_rank"]["source_label"] == "mlflow:abc123"  # not a job: as it was given
    # Only what differs from conf/compression/<method>.yaml: embeddings (default true), not the rest.
    assert by_method["quantize_dynamic"]["changed"] == {"embeddings": False}
    from ptmlab.views.compression import method_defaults

    sparsity = method_defaults("prune_magnitude").get("sparsity")
    expected = {"new_key": 1} if sparsity == 0.4 else {"sparsity": 0.4, "new_key": 1}
    assert by_method["prune_magnitude"]["changed"] == expected
    assert {r["source_label"] for r in view["references"]} == {"teacher (finetune)", "mlflow:abc123"}


def test_probing_view_averages_runs_and_computes_selectivity(db_url):
    clear_cache()
    layers = lambda acc: [{"layer": i, "accuracy": a, "control_accuracy": 0.5} for i, a in enumerate(acc)]
    with session_scope(db_url) as s:
        s.add_all(
            [
                new_result(
                    {"stage": "probe", "model": "m", "probe_task": "pos", "seed": 1, "layers": layers([0.6, 0.8])}
                ),
                new_result(
                    {"stage": "probe", "model": "m", "probe_task": "pos", "seed": 2, "layers": layers([0.7, 0.9])}
                ),
                new_result(
                    {
                        "stage": "probe",
                        "model": "r",
                        "probe_task": "pos",
                        "seed": 1,
                        "layers": layers([0.55, 0.56]),
                        "attention_heads": [
                            {"statistic": "entropy", "values": [[1, 2], [3, 4]]},
                            {"statistic": "max_weight", "values": [[0.1, 0.2], [0.3, 0.4]]},
                        ],
                    }
                ),
            ]
        )
        s.commit()
        view = probing_view(s)
    curves = {(c["model"], c["probe_task"]): c for c in view["curves"]}
    m = curves[("m", "pos")]
    assert m["runs"] == 2 and m["layers"] == [0, 1]
    assert m["accuracy"] == pytest.approx([0.65, 0.85]) and m["selectivity"] == pytest.approx([0.15, 0.35])
    assert m["accuracy_std"][0] == pytest.approx(0.0707, abs=1e-4) and "uuas" not in m
    assert view["statistics"] == ["entropy", "max_weight"] and len(view["heatmaps"]) == 2


def test_probing_view_draws_every_task_of_a_suite_with_its_random_init_baseline(db_url):
    from synthetic_results import probe_suite_summary

    clear_cache()
    summary = probe_suite_summary(random.Random(0), "minilm", seed=1)
    with session_scope(db_url) as s:
        s.add(new_result(summary))
        s.commit()
        view = probing_view(s)
    curves = {(c["model"], c["probe_task"]): c for c in view["curves"]}
    assert set(curves) == {
        ("minilm", "upos"),
        ("minilm (random init)", "upos"),
        ("minilm", "distance"),
        ("minilm (random init)", "distance"),
    }
    upos = curves[("minilm", "upos")]
    assert upos["accuracy"] == [e["accuracy"] for e in summary["tasks"][0]["layers"]]
    assert upos["selectivity"] == [e["selectivity"] for e in summary["tasks"][0]["layers"]]
    assert curves[("minilm (random init)", "distance")]["uuas"] == [0.41] * 5
    assert [(h["model"], h["probe_task"], h["statistic"]) for h in view["heatmaps"]] == [
        ("minilm", "attention", "entropy")
    ]
    assert view["cloze"] == [
        {
            "model": "minilm",
            "result_id": view["cloze"][0]["result_id"],
            "relation": "P19",
            "p_at_1": 0.3333,
            "p_at_10": 1.0,
            "mrr": 0.5,
            "facts": 4,
            "oov": 1,
            "scored": 3,
        }
    ]


def test_probing_view_shows_an_old_or_partly_broken_probe_row_as_it_did(db_url):
    # rows from before `seed`, a layer's `layer` and a task's `family` were required, and one whose
    # layer holds text where a number belongs (migration 0008 dropped it)
    clear_cache()
    old = {
        "stage": "probe",
        "model": "m",
        "probe_task": "suite",
        "tasks": [{"probe_task": "pos", "layers": [{"accuracy": 0.6}, {"accuracy": 0.8}]}],
    }
    broken = {
        "stage": "probe",
        "model": "m",
        "probe_task": "pos",
        "seed": 2,
        "layers": [{"layer": 0, "accuracy": 0.7}, {"layer": 1, "accuracy": "n/a", "control_accuracy": 0.5}],
    }
    with session_scope(db_url) as s:
        store_rows_from_before_schema_versions(s, [old, broken])
        view = probing_view(s)
    assert view["result_count"] == 2
    (curve,) = view["curves"]
    assert (curve["model"], curve["probe_task"], curve["runs"], curve["layers"]) == ("m", "pos", 2, [0, 1])
    assert curve["accuracy"] == pytest.approx([0.65, 0.8]) and curve["control_accuracy"] == [None, 0.5]


def test_compare_view_marks_differing_config_keys(tmp_path, db_url, monkeypatch):
    from ptmlab.settings import get_settings

    monkeypatch.setenv("PTMLAB_MLFLOW_UI_URL", "http://127.0.0.1:5000")
    get_settings.cache_clear()  # the conftest clears it again after the test
    clear_cache()
    for name, lr in (("a", 0.1), ("b", 0.2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text(f"model:\n  name: bert_tiny\noptimizer:\n  lr: {lr}\nseed: 1\n")
    with session_scope(db_url) as s:
        rows = [
            new_result(
                {
                    "stage": "finetune",
                    "run_dir": str(tmp_path / n),
                    "task": "sst2",
                    "seed": 1,
                    "metrics": {"accuracy": acc},
                    "mlflow_run_id": "abc" if n == "a" else None,
                }
            )
            for n, acc in (("a", 0.8), ("b", 0.9))
        ]
        s.add_all(rows)
        s.commit()
        view = compare_view(s, [rows[0].id, rows[1].id])
    assert view["differing"] == ["optimizer.lr"]
    assert view["config_keys"] == ["model.name", "optimizer.lr", "seed"]
    assert view["config_diff"] == {"keys": [{"key": "optimizer.lr", "values": [0.1, 0.2]}], "differing": 1, "total": 3}
    assert [k["key"] for k in view["config_all"]] == view["config_keys"]
    # hand-recorded results (no job) are named `result <id>`, never `#<id>`
    assert [r["label"] for r in view["runs"]] == [f"result {rows[0].id}", f"result {rows[1].id}"]
    assert view["runs"][0]["mlflow_url"].endswith("/#/runs/abc") and view["runs"][1]["mlflow_url"] is None
    assert view["runs"][1]["numbers"]["metrics.accuracy"] == 0.9
    # No MLflow UI known (plain `ptmlab serve`): no link to one that is not there.
    monkeypatch.delenv("PTMLAB_MLFLOW_UI_URL")
    get_settings.cache_clear()
    clear_cache()
    with session_scope(db_url) as s:
        assert compare_view(s, [rows[0].id])["runs"][0]["mlflow_url"] is None


def test_compare_view_labels_old_hand_recorded_and_partly_broken_rows_as_it_did(db_url):
    clear_cache()
    summaries = [
        {"stage": "finetune", "model": "bert_tiny", "adaptation": "lora", "task": "rte", "seed": 3},  # old
        {"stage": "custom", "task": "rte", "score": 0.5},  # recorded by hand, no contract
        {
            "stage": "probe",
            "model": "m",
            "probe_task": "pos",
            "seed": "3",
            "layers": [{"layer": 0, "accuracy": 0.5}, {"accuracy": 0.75, "uuas": "n/a"}],
        },
    ]
    with session_scope(db_url) as s:
        rows = store_rows_from_before_schema_versions(s, summaries)
        view = compare_view(s, [r.id for r in rows])
    finetune, custom, probe = view["runs"]
    # `label` names the run (by its job; these have none), `description` says what it was
    assert [r["label"] for r in view["runs"]] == [f"result {r.id}" for r in rows]
    assert finetune["description"] == f"result {rows[0].id} finetune: bert_tiny / lora / rte seed 3"
    assert (custom["kind"], custom["description"], custom["layers"]) == (
        "custom",
        f"result {rows[1].id} custom: rte",
        [],
    )
    assert custom["numbers"] == {"task": "rte", "score": 0.5}
    assert probe["description"] == f"result {rows[2].id} probe: m / pos seed 3"
    assert probe["layers"][0] == {"layer": 0, "accuracy": 0.5}
    assert probe["numbers"]["seed"] == 3  # the numbers table shows the row as stored, migrated: "3" read as its int


def test_tag_filter_parsing():
    assert parse_tag_filter("a=1, b = x=y") == {"a": "1", "b": "x=y"}
    assert parse_tag_filter("") == {}
    with pytest.raises(Exception, match="'nokey' is not key=value"):
        parse_tag_filter("nokey")


def _client(db_url, home, monkeypatch) -> TestClient:
    from ptmlab.api.app import create_app
    from ptmlab.settings import Settings

    monkeypatch.setenv("PTMLAB_HOME", str(home))
    return TestClient(create_app(Settings(home=home, database_url=db_url)))


def test_views_and_pages_with_no_results(db_url, tmp_path, monkeypatch):
    clear_cache()
    client = _client(db_url, tmp_path / "home", monkeypatch)
    for path in PAGES:
        r = client.get(path)
        assert r.status_code == 200, (path, r.text[:300])
        assert "<nav>" in r.text
    assert "No jobs yet" in client.get("/").text
    assert client.get("/api/v1/views/leaderboard").json()["rows"] == []
    comp = client.get("/api/v1/views/compression").json()
    assert comp["points"] == [] and comp["task"] is None and comp["fronts"]["params"] == []
    assert client.get("/api/v1/views/probing").json()["curves"] == []
    assert client.get("/api/v1/views/leaderboard?format=csv").text.startswith("model,objective,adaptation")
    assert client.get("/api/v1/views/compare?jobs=1").status_code == 404
    assert client.get("/jobs/5").status_code == 404


def test_view_endpoints_on_seeded_data(seeded, tmp_path, monkeypatch):
    url, ids = seeded
    client = _client(url, tmp_path / "home", monkeypatch)
    front_page = client.get("/").text
    for label in ("finetune_sst2", "pretrain_mlm", "compress results", "state-running"):
        assert label in front_page
    lb = client.get("/api/v1/views/leaderboard", params={"tag": "suite=glue"}).json()
    assert len(lb["rows"]) == 4
    latex = client.get("/api/v1/views/leaderboard", params={"format": "latex"})
    assert (
        latex.status_code == 200 and "\\toprule" in latex.text and "attachment" in latex.headers["content-disposition"]
    )
    assert client.get("/api/v1/views/leaderboard", params={"tag": "broken"}).json()["error"]["code"] == "config_error"
    probe = client.get("/api/v1/views/probing").json()
    assert len(probe["curves"]) == len(SEED_PROBE_MODELS) * len(SEED_PROBE_TASKS)
    job = client.get(f"/api/v1/views/jobs/{ids['jobs']['pipeline_child']}").json()
    assert [p["id"] for p in job["parents"]] == [ids["jobs"]["pipeline_parent"]]
    assert job["config"]["model"]["name"] == "bert_tiny" and job["config_source"].startswith("composed")
    parent = client.get(f"/api/v1/views/jobs/{ids['jobs']['pipeline_parent']}").json()
    assert [c["id"] for c in parent["children"]] == [ids["jobs"]["pipeline_child"]]
    # runs are named by their jobs: the succeeded job's result (the seeded rows' one with a job)
    succeeded = ids["jobs"]["succeeded"]
    cmp = client.get("/api/v1/views/compare", params={"jobs": str(succeeded)}).json()
    assert [(r["result_id"], r["job_id"], r["label"]) for r in cmp["runs"]] == [
        (ids["results"]["finetune"][0], succeeded, f"#{succeeded}")
    ]
    curves = client.get("/api/v1/views/curves", params={"jobs": str(succeeded)}).json()
    assert curves["curves"] == {} and curves["labels"] == {str(ids["results"]["finetune"][0]): f"#{succeeded}"}
    assert set(curves["errors"]) == {str(ids["results"]["finetune"][0])}
    assert client.get("/api/v1/views/compare", params={"jobs": "x"}).status_code == 422
    no_result = client.get("/api/v1/views/compare", params={"jobs": f"{succeeded},{ids['jobs']['failed']}"})
    assert no_result.status_code == 404 and f"job {ids['jobs']['failed']} has no result" in no_result.text
    # a result id names only a result recorded by hand; one of a job is refused, naming its job
    refused = client.get("/api/v1/views/compare", params={"runs": str(ids["results"]["finetune"][0])})
    assert refused.status_code == 422 and f"jobs={succeeded}" in refused.json()["error"]["message"]
    by_hand = ids["results"]["finetune"][1:3]
    cmp = client.get("/api/v1/views/compare", params={"runs": ",".join(map(str, by_hand))}).json()
    assert [r["label"] for r in cmp["runs"]] == [f"result {i}" for i in by_hand]
    assert client.get("/api/v1/views/compare").json()["error"]["message"].startswith("jobs:")
    assert f"Job {ids['jobs']['failed']}" in client.get(f"/jobs/{ids['jobs']['failed']}").text


def test_views_cache_sees_new_results(db_url):
    clear_cache()
    row = lambda acc: new_result(
        {"stage": "finetune", "model": "m", "task": "sst2", "seed": 1, "metrics": {"accuracy": acc}}
    )
    with session_scope(db_url) as s:
        s.add(row(0.5))
        s.commit()
        assert leaderboard_view(s)["rows"][0]["cells"]["sst2"]["mean"] == pytest.approx(50.0)
        s.add(row(0.7))  # a re-run of the same seed replaces the earlier one
        s.commit()
        assert leaderboard_view(s)["rows"][0]["cells"]["sst2"]["mean"] == pytest.approx(70.0)


def test_static_files_and_plotly_are_served_locally(tmp_path, monkeypatch):
    client = _client(f"sqlite:///{tmp_path / 'p.db'}", tmp_path / "home", monkeypatch)
    plotly = client.get("/static/vendor/plotly.min.js")
    assert plotly.status_code == 200 and len(plotly.content) > 1_000_000
    assert client.get("/static/js/api.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/%2e%2e/%2e%2e/pyproject.toml").status_code == 404
    assert client.get("/static/js/nope.js").status_code == 404
    for path in PAGES:
        html = client.get(path).text
        assert "cdn" not in html.lower() and "https://" not in html


def test_metric_curves_come_from_mlflow_history(tmp_path):
    """The one view that reads MLflow: a real SQLite-backed store with a logged metric history."""
    from mlflow.tracking import MlflowClient

    from ptmlab.views import metric_curves

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("views", artifact_location=str(tmp_path / "artifacts"))
    run = client.create_run(experiment)
    for step, loss in enumerate([3.0, 2.5, 2.1]):
        client.log_metric(run.info.run_id, "train/loss", loss, step=step * 10)
    client.log_metric(run.info.run_id, "val/sst2/acc", 0.8, step=30)
    client.set_terminated(run.info.run_id)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    with session_scope(db) as s:
        rows = [
            new_result({"stage": "finetune", "mlflow_run_id": run.info.run_id}),
            new_result({"stage": "finetune", "mlflow_run_id": "0" * 32}),
        ]
        s.add_all(rows)
        s.commit()
        out = metric_curves(s, [rows[0].id, rows[1].id], tracking_uri=uri)
        only = metric_curves(s, [rows[0].id], keys=["val/sst2/acc"], tracking_uri=uri)
    loss = out["curves"]["train/loss"]
    assert [{k: c[k] for k in ("result_id", "steps", "values")} for c in loss] == [
        {"result_id": rows[0].id, "steps": [0, 10, 20], "values": [3.0, 2.5, 2.1]}
    ]
    # Seconds since the run started, for the wall-time axis.
    assert loss[0]["times"] == sorted(loss[0]["times"]) and 0 <= loss[0]["times"][0] < 60
    assert out["curves"]["val/sst2/acc"][0]["values"] == [0.8]
    assert list(out["errors"]) == [str(rows[1].id)] and out["errors"][str(rows[1].id)].startswith("MLflow:")
    assert list(only["curves"]) == ["val/sst2/acc"]

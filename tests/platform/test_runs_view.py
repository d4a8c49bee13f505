"""The runs table (ptmlab.views.runs, GET /api/v1/views/runs): any summary key as a column, sort
on any column with missing values last, filters, free-text search over job names, tags and text
values, and a bad filter refused with one line, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from ptmlab.db import session_scope
from ptmlab.db.models import Job
from ptmlab.results import clear_cache, new_result
from ptmlab.views import runs_view
from ptmlab.views.runs import flatten

RUNS = [  # (job name, summary, tags)
    (
        "lr-small",
        {
            "stage": "finetune",
            "model": "bert_tiny",
            "task": "sst2",
            "main_score": 0.81,
            "metrics": {"accuracy": 0.81, "loss": 0.45},
            "lr": 1e-4,
        },
        {"suite": "glue"},
    ),
    (
        "lr-large",
        {
            "stage": "finetune",
            "model": "bert_tiny",
            "task": "sst2",
            "main_score": 0.74,
            "metrics": {"accuracy": 0.74, "loss": 0.61},
            "lr": 1e-3,
        },
        {"suite": "glue"},
    ),
    (
        "electra-rte",
        {
            "stage": "finetune",
            "model": "electra_tiny",
            "task": "rte",
            "main_score": 0.58,
            "metrics": {"accuracy": 0.58},
        },
        {"suite": "rte-study"},
    ),
    (
        "int8",
        {
            "stage": "compress",
            "method": "quantize_dynamic",
            "task": "sst2",
            "score": 0.80,
            "config": {"embeddings": False},
            "layers": [{"layer": 0}],
        },
        {},
    ),
]


@pytest.fixture()
def seeded(db_url):
    clear_cache()
    with session_scope(db_url) as s:
        ids = {}
        for name, summary, tags in RUNS:
            job = Job(stage=summary["stage"], name=name, overrides=[])
            s.add(job)
            s.flush()
            row = new_result(summary, job_id=job.id, tags=tags)
            s.add(row)
            s.flush()
            ids[name] = row.id
        s.commit()
    return db_url, ids


def test_flatten_dots_nested_keys_and_leaves_arrays_out():
    assert flatten(
        {
            "metrics": {"accuracy": 0.9, "per_class": {"a": 1}},
            "layers": [{"layer": 0}],
            "tasks": ["a", "b"],
            "none": None,
        }
    ) == {"metrics.accuracy": 0.9, "metrics.per_class.a": 1}
    assert flatten({"seeds": [1, 2]}) == {"seeds": "1, 2"}


def test_columns_sort_filter_and_search(seeded):
    url, ids = seeded
    with session_scope(url) as s:
        view = runs_view(s, columns=["metrics.accuracy", "config.embeddings"], sort="metrics.accuracy", order="desc")
        assert [r["result_id"] for r in view["rows"]] == [
            ids["lr-small"],
            ids["lr-large"],
            ids["electra-rte"],
            ids["int8"],
        ]
        assert view["rows"][-1]["values"] == {"metrics.accuracy": None, "config.embeddings": False}  # missing: last
        assert view["rows"][0]["job_name"] == "lr-small"
        keys = {a["key"]: a for a in view["available"]}
        assert keys["metrics.accuracy"]["count"] == 3 and keys["metrics.accuracy"]["numeric"]
        assert not keys["model"]["numeric"] and "layers" not in keys and "tag.suite" in keys
        ascending = runs_view(s, columns=["metrics.accuracy"], sort="metrics.accuracy", order="asc")
        assert [r["result_id"] for r in ascending["rows"]] == [
            ids["electra-rte"],
            ids["lr-large"],
            ids["lr-small"],
            ids["int8"],
        ]

        assert runs_view(s, filters=["metrics.accuracy>=0.74", "task=sst2"])["total"] == 2
        assert runs_view(s, filters=["metrics.accuracy>0.74"])["total"] == 1
        assert runs_view(s, filters=["model~ELECTRA"])["total"] == 1
        assert runs_view(s, filters=["model!=bert_tiny"])["total"] == 2  # missing counts as different
        assert runs_view(s, kind="compress")["total"] == 1
        assert runs_view(s, q="rte-study")["total"] == 1  # a tag value
        assert runs_view(s, q="LR-")["total"] == 2  # job names, case-insensitive
        assert runs_view(s, q="quantize")["total"] == 1  # a text value of the summary
        paged = runs_view(s, sort="id", order="asc", limit=2, offset=2)
        assert [r["result_id"] for r in paged["rows"]] == [ids["electra-rte"], ids["int8"]] and paged["total"] == 4
        assert runs_view(s)["columns"] == ["kind", "model", "task", "method", "main_score"]


def test_the_endpoint_and_a_bad_filter(seeded, tmp_path):
    from ptmlab.api.app import create_app
    from ptmlab.settings import Settings

    url, ids = seeded
    client = TestClient(create_app(Settings(home=tmp_path / "home", database_url=url)))
    body = client.get(
        "/api/v1/views/runs",
        params=[("column", "metrics.loss"), ("sort", "metrics.loss"), ("order", "asc"), ("filter", "task=sst2")],
    ).json()
    assert [r["values"]["metrics.loss"] for r in body["rows"]] == [0.45, 0.61, None]
    bad = client.get("/api/v1/views/runs", params={"filter": "accuracy>>"})
    assert bad.status_code == 422 and "filter 'accuracy>>'" in bad.json()["error"]["message"]
    assert client.get("/api/v1/views/runs", params={"sort": "a b"}).status_code == 422
    assert client.get("/runs").status_code == 200


def test_a_groups_status_in_one_word():
    from ptmlab.queue.groups import group_status

    assert group_status({}) == "queued"
    assert group_status({"succeeded": 3, "running": 1}) == "running"
    assert group_status({"succeeded": 3, "queued": 1}) == "queued"
    assert group_status({"succeeded": 3, "failed": 1}) == "failed"
    assert group_status({"succeeded": 3, "pruned": 9}) == "succeeded"  # a study's normal end
    assert group_status({"cancelled": 2, "pruned": 1}) == "cancelled"
    assert group_status({"pruned": 2}) == "pruned"

"""The dashboard's folded views (ptmlab.results `folded`: aggregates kept up to date as results
arrive, not rebuilt from every row) against the same views built from scratch, on SQLite and
PostgreSQL: after rows arrive in rounds (re-runs, a point that takes over a Pareto front, a
measured reference), after a row is deleted, and the response bytes joined from the points'
kept JSON against Starlette's own encoding."""

from __future__ import annotations

import json
import random

import sqlalchemy as sa
from starlette.responses import JSONResponse
from synthetic_results import compress_summary, finetune_summary, probe_summary, synthetic_summaries

from ptmlab.db import session_scope
from ptmlab.db.models import Job, Result, Sweep
from ptmlab.queue import list_groups, list_jobs, submit_job
from ptmlab.results import clear_cache, new_result, query_results
from ptmlab.views import compression_view, leaderboard_export, leaderboard_view, pareto_front, probing_view, runs_view
from ptmlab.views.encoded import json_body

VIEWS = {
    "leaderboard": lambda s: leaderboard_view(s),
    "leaderboard, filtered": lambda s: leaderboard_view(s, tags={"suite": "glue"}, adaptations=["full"]),
    "csv": lambda s: leaderboard_export(s, "csv"),
    "compression": lambda s: compression_view(s),
    "probing": lambda s: probing_view(s),
    "runs by score": lambda s: runs_view(s, sort="score", order="desc", limit=40, offset=10),
    "runs by id, searched": lambda s: runs_view(s, q="sst2", filters=["main_score>=0.6"], order="asc"),
    "runs of a kind": lambda s: runs_view(s, kind="compress", sort="params", order="asc", limit=500),
    # groups kept row by row (running mean and variance) against groups made from every row
    "runs grouped by a config key": lambda s: runs_view(
        s, group_by=["stage.lr"], columns=["main_score", "task"], sort="main_score", limit=500
    ),
    "runs grouped, filtered": lambda s: runs_view(
        s,
        kind="finetune",
        q="sst2",
        filters=["main_score>=0.6"],
        group_by=["model", "stage.batch_size"],
        columns=["main_score"],
    ),
}


def _views(url: str) -> dict:
    with session_scope(url) as s:
        return {name: json.loads(json_body({"v": view(s)})) for name, view in VIEWS.items()}


def _from_scratch(url: str) -> dict:
    clear_cache()
    return _views(url)


def _round(rng: random.Random, i: int) -> list[Result]:
    rows = [
        new_result(finetune_summary(rng, "bert_tiny", "mlm", "full", "sst2", 1), tags={"suite": "glue"}),  # a re-run
        new_result(finetune_summary(rng, "gpt_tiny", "clm", "adapters", "rte", 100 + i), tags={"suite": "glue"}),
        new_result(compress_summary(rng, "distill", "bert_tiny", "sst2", 100 + i)),
        new_result(probe_summary(rng, "bert_tiny", "pos", 100 + i)),
    ]
    best = compress_summary(rng, "prune_magnitude", "bert_tiny", "sst2", 200 + i)
    dominating = {**best["compressed"], "score": 0.99, "params": 10 + i, "size_bytes": 10, "latency_ms": 0.1}
    rows.append(new_result({**best, "compressed": dominating}))
    if i == 1:  # the uncompressed source measured in a run of its own: every point's retention changes
        rows.append(
            new_result(
                {**best, "method": "none", "compressed": {**best["compressed"], "score": 0.95}, "retention": None}
            )
        )
    return rows


def test_folded_views_equal_views_built_from_scratch(db_url):
    clear_cache()
    rng = random.Random(1)
    with session_scope(db_url) as s:
        s.add_all(
            new_result(x, tags={"suite": "glue" if i % 2 else "other"}) for i, x in enumerate(synthetic_summaries(400))
        )
        s.commit()
    _views(db_url)  # the folds are made here and only take rows in from now on
    for i in range(3):
        with session_scope(db_url) as s:
            s.add_all(_round(rng, i))
            s.commit()
        folded = _views(db_url)
        assert folded == _from_scratch(db_url), f"round {i}"
    grouped = folded["runs grouped by a config key"]["v"]
    assert grouped["group_total"] == 4 and sum(g["n"] for g in grouped["groups"]) == grouped["total"]
    assert {g["key"]["stage.lr"] for g in grouped["groups"]} == {1e-5, 1e-4, 1e-3, None}  # None: rows of other kinds
    runs = folded["runs by id, searched"]["v"]
    assert runs["total"] > 0 and [r["result_id"] for r in runs["rows"]] == sorted(r["result_id"] for r in runs["rows"])
    compression = folded["compression"]["v"]
    assert compression["fronts"]["params"][0] > 400  # the new dominating point leads the front
    for axis, front in compression["fronts"].items():  # fronts kept point by point = made from every point
        assert set(front) == pareto_front(compression["points"], axis), axis
        assert {p["id"] for p in compression["points"] if p["pareto"][axis]} == set(front)

    # A deleted row (results are only ever inserted, but a person may clean up): the folds start over.
    with session_scope(db_url) as s:
        newest = s.scalar(sa.select(sa.func.max(Result.id)).where(Result.kind == "compress"))
        s.execute(sa.delete(Result).where(Result.id == newest))
        s.commit()
    after = _views(db_url)
    assert newest not in {p["id"] for p in after["compression"]["v"]["points"]}
    assert after == _from_scratch(db_url)


def test_result_list_count_by_tag_follows_new_rows(db_url):
    clear_cache()
    rng = random.Random(3)
    row = lambda suite: new_result(
        finetune_summary(rng, "bert_tiny", "mlm", "full", "sst2", 1), tags={"suite": suite}, sweep_id="s1"
    )
    with session_scope(db_url) as s:
        s.add_all([row("glue"), row("glue"), row("other")])
        s.commit()
        assert query_results(s, kind="finetune", tags={"suite": "glue"})[1] == 2
        s.add_all([row("glue"), row("other")])
        s.commit()
        rows, total = query_results(s, kind="finetune", tags={"suite": "glue"}, sweep_id="s1", limit=1)
        assert (len(rows), total) == (1, 3)
        assert query_results(s, tags={"suite": "other"})[1] == 2


def test_sweep_list_best_run_from_cached_rows(db_url):
    clear_cache()
    with session_scope(db_url) as s:
        s.add(Sweep(id="sw1", name="grid", spec={}))
        s.flush()
        jobs = [Job(stage="finetune", overrides=[], sweep_id="sw1", status="succeeded") for _ in range(3)]
        s.add_all(jobs)
        s.flush()
        for job, score in zip(jobs, (0.7, 0.9, 0.8), strict=True):
            s.add(new_result({"stage": "finetune", "main_score": score}, job_id=job.id))
        s.commit()
        [group] = list_groups(s, "sweep")[0]
        assert group["best"]["score"] == 0.9 and group["best"]["job_id"] == jobs[1].id
        s.add(new_result({"stage": "finetune", "main_score": 0.95}, job_id=jobs[2].id))  # a later, better run
        s.commit()
        assert list_groups(s, "sweep")[0][0]["best"]["job_id"] == jobs[2].id


def test_job_list_names_each_jobs_parents(db_url):
    with session_scope(db_url) as s:
        a, b = submit_job(s, stage="sleep", queue="folds"), submit_job(s, stage="sleep", queue="folds")
        child = submit_job(s, stage="sleep", queue="folds", depends_on=[b.id, a.id])
        jobs, total = list_jobs(s, queue="folds", limit=2)
        assert total == 3 and [j.to_dict()["depends_on"] for j in jobs] == [[a.id, b.id], []]
        assert [j.id for j in jobs] == [child.id, b.id]


def test_joined_response_body_is_what_starlette_would_send(db_url):
    clear_cache()
    rng = random.Random(2)
    with session_scope(db_url) as s:
        s.add_all(
            new_result(compress_summary(rng, m, "bert_tiny", "sst2", i))
            for i, m in enumerate(["distill", "low_rank", "prune_magnitude"] * 5)
        )
        s.commit()
        view = compression_view(s)
        body = json_body(view)
        assert json.loads(body) == json.loads(JSONResponse(view).body)
        assert json_body(view) is body  # the same cached view: the bytes made once
        plain = {"a": [1, 2.5, None], "b": "é"}
        assert json_body(plain) == JSONResponse(plain).body

"""The job page shows how fast a pretrain job trained: its result's `throughput` (tokens/s,
samples/s, MFU, data wait, padding) comes with the job's detail view; a result without one, or
with a malformed one, leaves the rest of the page intact."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from ptmlab.contracts import ConfigError, PretrainSummary, validate_summary
from ptmlab.db import session_scope
from ptmlab.results import new_result

THROUGHPUT = {
    "tokens_per_s": 412_345.6,
    "samples_per_s": 3221.4,
    "mfu": 0.512,
    "data_wait_fraction": 0.021,
    "padding_fraction": 0.0,
    "peak_flops": 989.5e12,
    "device": "NVIDIA H100 80GB HBM3",
    "world_size": 1,
    "timed_steps": 180,
}


def pretrain_summary(throughput) -> dict:
    summary = PretrainSummary(
        seed=0,
        wall_time_s=10.0,
        model="bert_tiny",
        family="bert",
        objective="mlm",
        data="gutenberg",
        steps=200,
        tokens_seen=819_200,
        train_flops=1e15,
        params=4_000_000,
        vocab_size=30_522,
        checkpoint="/x/last.ckpt",
        export_dir="/x/export",
    ).model_dump()
    summary["throughput"] = throughput
    return summary


def test_pretrain_job_detail_carries_its_throughput(tmp_path, monkeypatch):
    from ptmlab.api.app import create_app
    from ptmlab.queue import submit_job
    from ptmlab.settings import Settings

    url = f"sqlite:///{tmp_path / 'platform.db'}"
    home = tmp_path / "home"
    monkeypatch.setenv("PTMLAB_HOME", str(home))
    client = TestClient(create_app(Settings(home=home, database_url=url)))
    with session_scope(url) as s:
        jobs = [submit_job(s, stage="pretrain", overrides=["model=bert_tiny", "objective=mlm"]) for _ in range(2)]
        s.commit()
        ids = [j.id for j in jobs]
        s.add_all(
            [new_result(pretrain_summary(THROUGHPUT), job_id=ids[0]), new_result(pretrain_summary(None), job_id=ids[1])]
        )
        s.commit()
    with pytest.raises(ConfigError, match=r"^result summary: throughput\.mfu: "):  # malformed: never stored
        new_result(pretrain_summary({**THROUGHPUT, "mfu": -3}), job_id=ids[0])

    detail = client.get(f"/api/v1/views/jobs/{ids[0]}").json()
    speed = detail["results"][0]["throughput"]
    assert speed["tokens_per_s"] == THROUGHPUT["tokens_per_s"] and speed["mfu"] == 0.512
    assert speed["data_wait_fraction"] == 0.021 and speed["device"] == "NVIDIA H100 80GB HBM3"
    for job_id in ids[1:]:  # absent: no throughput, the page still has its results
        detail = client.get(f"/api/v1/views/jobs/{job_id}").json()
        assert [r["throughput"] for r in detail["results"]] == [None]
    page = client.get(f"/jobs/{ids[0]}")
    assert page.status_code == 200 and "job-results" in page.text
    script = client.get("/static/js/job.js").text
    assert "speedTable(r.throughput)" in script and "MFU" in script


def test_summary_contract_types_the_throughput():
    validate_summary(pretrain_summary(THROUGHPUT))
    validate_summary(pretrain_summary({**THROUGHPUT, "mfu": None, "peak_flops": None}))  # unknown peak: null MFU
    with pytest.raises(ConfigError, match="data_wait_fraction"):
        validate_summary(pretrain_summary({**THROUGHPUT, "data_wait_fraction": 1.5}))

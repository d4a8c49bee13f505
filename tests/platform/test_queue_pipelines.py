"""Pipelines (conf/pipeline/*.yaml): expansion, validation errors, every shipped pipeline's jobs
compose, and a graph run end to end by a real worker with `job:` references resolved."""

from __future__ import annotations

import pytest

from ptmlab import queue
from ptmlab.config import compose_config
from ptmlab.db import SUCCEEDED, dispose_engines, get_sessionmaker
from ptmlab.errors import ConfigError
from ptmlab.queue.pipelines import list_pipelines


def test_expansion_of_vars_and_references():
    jobs = queue.expand_pipeline("sleep_graph", overrides=["+tags.x=1"])
    names = [j.name for j in jobs]
    assert names == ["prepare", "work-0.1-1", "work-0.1-2", "work-0.2-1", "work-0.2-2", "report"]
    work = jobs[1]
    assert work.overrides == ["stage.seconds=0.1", "+stage.input=job:prepare", "+tags.x=1"]
    assert work.depends_on == ["prepare"] and work.options["seed"] == "1"
    assert jobs[-1].depends_on == names[1:5]


def test_hydra_interpolations_pass_through():
    spec = {
        "name": "p",
        "vars": {"m": ["a"]},
        "jobs": [{"name": "j-{m}", "stage": "sleep", "overrides": ["run_name=${stage.name}-{m}", "+x={unknown}"]}],
    }
    (job,) = queue.expand_pipeline(spec)
    assert job.overrides == ["run_name=${stage.name}-a", "+x={unknown}"]


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"jobs": [{"name": "a", "stage": "sleep", "overrides": ["+x=job:b"]}]}, "not an earlier job"),
        ({"jobs": [{"name": "a"}, {"name": "a"}]}, "appears twice"),
        ({"jobs": [{"name": "a", "gpu": 1}]}, "unknown key(s) gpu"),
        ({"jobs": []}, "non-empty list"),
        ({"jobs": [{"name": "a"}], "matrix": {}}, "unknown key(s) matrix"),
        ({"vars": {"v": []}, "jobs": [{"name": "a-{v}"}]}, "vars.v is empty"),
    ],
)
def test_invalid_pipelines_name_the_problem(spec, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        queue.expand_pipeline({"name": "bad", **spec})


def test_missing_pipeline_lists_the_available_ones():
    with pytest.raises(ConfigError, match="sleep_graph"):
        queue.load_pipeline("no_such_pipeline")


@pytest.mark.parametrize("name", list_pipelines())
def test_every_shipped_pipeline_composes(name):
    for job in queue.expand_pipeline(name):
        compose_config([f"stage={job.stage}", *job.overrides])


def test_pipeline_runs_through_a_worker(tmp_path, spawn_worker):
    url = f"sqlite:///{tmp_path / 'platform.db'}"
    home = tmp_path / "home"
    with get_sessionmaker(url)() as s:
        pipeline, jobs = queue.submit_pipeline(s, "sleep_graph")
        ids = {j.name: j.id for j in jobs}
        assert jobs[1].overrides[1] == f"+stage.input=job:{ids['prepare']}"
        assert sorted(jobs[-1].parent_ids) == sorted(ids[n] for n in ids if n.startswith("work"))
    worker = spawn_worker(url, home, "--cpu-slots", "2", "--burst")
    assert worker.wait(timeout=180) == 0
    with get_sessionmaker(url)() as s:
        done, total = queue.list_jobs(s, pipeline_id=pipeline.id)
        assert total == 6 and {j.status for j in done} == {SUCCEEDED}
        argv = queue.list_attempts(s, ids["work-0.2-2"])[0].argv
        assert f"+stage.input={home / 'jobs' / str(ids['prepare']) / 'run'}" in argv
        assert queue.get_job(s, ids["work-0.2-2"]).seed == 2
        starts = {n: queue.list_attempts(s, i)[0].started_at for n, i in ids.items()}
        ends = {n: queue.list_attempts(s, i)[0].finished_at for n, i in ids.items()}
    assert all(starts[n] >= ends["prepare"] for n in ids if n.startswith("work"))
    assert starts["report"] >= max(ends[n] for n in ids if n.startswith("work"))
    dispose_engines()


def test_best_of_reference_picks_the_parent_that_scored_highest(tmp_path):
    """`job:best:<a>|<b>`: both are parents; at claim time the value is the run folder of the one
    whose result scored higher (a finetune's main_score, a compress job's score)."""
    from ptmlab.db import RUNNING, migrate
    from ptmlab.queue import claim_next_job, finish_attempt

    url = f"sqlite:///{tmp_path / 'ptmlab.db'}"
    migrate(url)
    spec = {
        "name": "best",
        "vars": {"m": ["a", "b"]},
        "jobs": [
            {"name": "finetune-{m}", "stage": "sleep"},
            {"name": "compress", "stage": "sleep", "overrides": ["+stage.input=job:best:finetune-a|finetune-b"]},
        ],
    }
    (compress,) = [j for j in queue.expand_pipeline(spec) if j.name == "compress"]
    assert compress.depends_on == ["finetune-a", "finetune-b"]
    with get_sessionmaker(url)() as s:
        _, jobs = queue.submit_pipeline(s, spec)
        ids = {j.name: j.id for j in jobs}
        assert jobs[2].overrides == [f"+stage.input=job:best:{ids['finetune-a']}|{ids['finetune-b']}"]
        for score in (0.71, 0.86):  # finetune-a, then finetune-b
            claim = claim_next_job(
                s,
                worker_id="w",
                queues=["default"],
                free_gpus=0,
                free_cpu_slots=1,
                lease_s=30,
                jobs_root=tmp_path / "jobs",
            )
            finish_attempt(
                s,
                job_id=claim.job_id,
                attempt_id=claim.attempt_id,
                worker_id="w",
                outcome=SUCCEEDED,
                summary={"stage": "sleep", "seconds": 0.0, "main_score": score},
            )
        claim = claim_next_job(
            s, worker_id="w", queues=["default"], free_gpus=0, free_cpu_slots=1, lease_s=30, jobs_root=tmp_path / "jobs"
        )
        assert claim.job_id == ids["compress"] and queue.get_job(s, claim.job_id).status == RUNNING
        assert claim.overrides == [f"+stage.input={tmp_path / 'jobs' / str(ids['finetune-b']) / 'run'}"]
    dispose_engines()


def test_a_compressed_models_score_is_its_measurement_for_job_best():
    from ptmlab.queue.claim import result_score

    assert result_score({"main_score": 0.8, "metrics": {"accuracy": 0.8}}) == 0.8
    assert result_score({"compressed": {"score": 0.7}, "source": {"score": 0.9}}) == 0.7  # not the source's
    assert result_score({"score": 0.6, "source_score": 0.9}) == 0.6  # a row stored flat
    assert result_score({"compressed": {"score": None}, "source": {"score": 0.9}}) is None

"""Multi-objective studies over compression settings (issue 26 item 5): the spec's checks (one
line, exit 2 / 422, nothing queued), a study whose objectives are read from each trial's stored
compress summary with its Pareto set checked against the non-dominated trials computed here, the
study page and the compression view's `?study=` front, and a sleep-stage study through a real
API and a real worker (the sleep stage's made-up score and size stand in for a compressed model).

The compress trials are played by hand as in hand_driven_study.py: each queued job is marked
running, then succeeded with the results row the worker would store (a CompressSummary made up
from the trial's settings), and the study advances: no model is compressed, since what is tested
is the platform's part (ask, read the summary, tell, the Pareto set, the pages)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from waiting import wait_until

COMPRESS_SPACE = [
    "compression=low_rank",
    "compression.param_ratio=interval(0.1,0.9)",
    "compression.finetune_epochs=choice(0,1)",
]
OBJECTIVES = {"objectives": ["score", "size_bytes"], "directions": ["maximize", "minimize"]}
N_TRIALS = 8


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'platform.db'}"


def made_up_summary(job, ratio: float, epochs: int) -> dict:
    """What a low_rank compress job would store: more kept parameters score higher and weigh more;
    the extra epoch adds a little score (so some trials are dominated)."""
    size = int(4_000_000 * ratio) + 100_000
    return {
        "stage": "compress",
        "seed": 42,
        "wall_time_s": 1.0,
        "method": "low_rank",
        "source_ref": "job:1",
        "task": "sst2",
        "compressed": {
            "score": round(0.5 + 0.3 * ratio**0.5 + 0.1 * epochs, 6),
            "params": int(1_000_000 * ratio),
            "size_bytes": size,
            "latency_ms": 2.0 + 10 * ratio,
        },
        "source": {"score": 0.9, "size_bytes": 4_100_000, "params": 1_000_000},
        "config": {"param_ratio": ratio, "finetune_epochs": epochs},
        "job_id": job.id,
    }


def drive_compress_study(url: str, **spec) -> str:
    import sqlalchemy as sa

    from ptmlab import studies
    from ptmlab.db import QUEUED, RUNNING, SUCCEEDED, Job, get_sessionmaker
    from ptmlab.results import new_result

    plan = studies.plan_study(
        studies.StudySpec(
            name="compress_front",
            stage="compress",
            overrides=COMPRESS_SPACE,
            **OBJECTIVES,
            n_trials=N_TRIALS,
            n_parallel=2,
            seed=1,
            queue="parked",
            **spec,
        )
    )
    with get_sessionmaker(url)() as s:
        study = studies.create_study(s, plan, url=url, driver_id="test")
        for _ in range(N_TRIALS):
            job = s.scalar(sa.select(Job).where(Job.study_id == study.id, Job.status == QUEUED).order_by(Job.id))
            args = dict(o.split("=", 1) for o in job.overrides)
            job.status, job.worker_id = RUNNING, "by-hand"
            s.commit()
            studies.advance_study(s, study.id, url=url, driver_id="test")  # nothing to report or prune
            summary = made_up_summary(
                job, float(args["compression.param_ratio"]), int(args["compression.finetune_epochs"])
            )
            job.status = SUCCEEDED
            s.add(new_result(summary, job_id=job.id, tags=job.tags))  # as the worker stores it
            s.commit()
            studies.advance_study(s, study.id, url=url, driver_id="test")
        return study.id


def non_dominated(points: dict[int, tuple[float, float]]) -> set[int]:
    """(score ↑, size ↓) by hand: q dominates p when it is no worse in both and better in one."""
    return {
        n
        for n, (score, size) in points.items()
        if not any(s2 >= score and z2 <= size and (s2, z2) != (score, size) for s2, z2 in points.values())
    }


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    from ptmlab.db import dispose_engines
    from ptmlab.studies.storage import forget_storages

    tmp = tmp_path_factory.mktemp("multiobjective")
    url = f"sqlite:///{tmp / 'platform.db'}"
    study_id = drive_compress_study(url, sampler="random")
    yield url, tmp / "home", study_id
    forget_storages()
    dispose_engines()


# -- the spec: one line, exit 2 / 422, nothing queued -------------------------------------------
SLEEP_TRADEOFF = ["stage.quality=interval(0.1,1)", "stage.size_bytes=range(1000,100000)"]
BAD = {
    "both": ({"objective": "val/score", **OBJECTIVES}, "give one or the other"),
    "lengths": ({"objectives": ["score", "size_bytes"], "directions": ["maximize"]}, "1 given for 2 objectives"),
    "directions alone": (
        {"objective": "score", "directions": ["maximize", "minimize"]},
        "directions: given without objectives",
    ),
    "pruner": ({**OBJECTIVES, "pruner": "median"}, "a multi-objective study cannot prune"),
    "not in the summary": (
        {"objectives": ["score", "latency_ms"], "directions": ["maximize", "minimize"]},
        "objective 'latency_ms': the stage=sleep summary has no such number",
    ),
    "cmaes": ({**OBJECTIVES, "sampler": "cmaes"}, "CMA-ES takes one objective"),
    "twice": ({"objectives": ["score", "score"], "directions": ["maximize", "minimize"]}, "names one twice"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_multiobjective_study_is_a_422_with_one_line_and_nothing_queued(case, tmp_path):
    from ptmlab.api.app import create_app
    from ptmlab.db import dispose_engines
    from ptmlab.settings import Settings

    body, message = BAD[case]
    settings = Settings(home=tmp_path / "home", database_url=sqlite_url(tmp_path), data_dir=tmp_path / "data")
    with TestClient(create_app(settings)) as client:
        r = client.post("/api/v1/studies", json={"stage": "sleep", "overrides": SLEEP_TRADEOFF, **body})
        assert r.status_code == 422, r.text
        text = r.json()["error"]["message"]
        assert message in text and "\n" not in text, text
        assert client.get("/api/v1/studies").json()["total"] == 0
        assert client.get("/api/v1/jobs").json()["total"] == 0
    dispose_engines()


@pytest.mark.parametrize("case", ["both", "lengths", "pruner", "not in the summary"])
def test_bad_multiobjective_study_on_the_command_line_exits_2(case, tmp_path, monkeypatch, capsys):
    from ptmlab.cli import main
    from ptmlab.db import dispose_engines

    body, message = BAD[case]
    monkeypatch.setenv("PTMLAB_HOME", str(tmp_path / "home"))
    argv = ["study", "create", "--stage", "sleep", "--database-url", sqlite_url(tmp_path)]
    if "objective" in body:
        argv += ["--objective", body["objective"]]
    if "objectives" in body:
        argv += ["--objectives", ",".join(body["objectives"]), "--directions", ",".join(body["directions"])]
    if "pruner" in body:
        argv += ["--pruner", body["pruner"]]
    with pytest.raises(SystemExit) as exited:
        main([*argv, *SLEEP_TRADEOFF])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and message in err and err.count("\n") == 1, err
    import sqlalchemy as sa

    from ptmlab.db import Job, session_scope

    with session_scope(sqlite_url(tmp_path)) as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(Job)) == 0
    dispose_engines()


def test_hydra_sweeper_takes_objectives_and_directions(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home"), "PTMLAB_DATABASE_URL": sqlite_url(tmp_path)}

    def multirun(*overrides):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "ptmlab.run",
                "-m",
                "hydra/sweeper=ptmlab_optuna",
                "hydra.sweeper.directions=[maximize,minimize]",
                "hydra.sweeper.sampler=nsga2",
                "stage=sleep",
                *SLEEP_TRADEOFF,
                *overrides,
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )

    ok = multirun("hydra.sweeper.objectives=[score,size_bytes]")
    assert ok.returncode == 0 and "2 trial(s) queued" in ok.stdout, ok.stderr
    bad = multirun("hydra.sweeper.objectives=[score,latency_ms]")
    assert bad.returncode == 2 and "objective 'latency_ms'" in bad.stderr and bad.stderr.count("\n") == 1, bad.stderr
    import sqlalchemy as sa

    from ptmlab.db import Job, Study, dispose_engines, session_scope

    with session_scope(sqlite_url(tmp_path)) as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(Job)) == 2
        assert [st.spec["objectives"] for st in s.scalars(sa.select(Study))] == [["score", "size_bytes"]]
    dispose_engines()


def test_objectives_of_compress_and_finetune_summaries():
    from ptmlab.config import compose_config
    from ptmlab.studies.objective import summary_objectives, summary_value

    compress = summary_objectives(compose_config(["stage=compress"]))
    assert {"score", "retention", "latency_ms", "size_bytes", "size_ratio", "params", "flops"} <= compress
    assert "method" not in compress and "retention_with_extra_training" not in compress  # text, a flag
    finetune = summary_objectives(compose_config(["stage=finetune", "task=demo/sentiment"]))
    assert "metrics.val/sentiment/accuracy" in finetune and "main_score" in finetune
    summary = {"score": 0.8, "metrics": {"val/sentiment/accuracy": 0.7}, "latency_ms": None, "flag": True}
    assert summary_value(summary, "score") == 0.8
    assert summary_value(summary, "metrics.val/sentiment/accuracy") == 0.7
    assert summary_value(summary, "latency_ms") is None and summary_value(summary, "flag") is None
    # a compress summary's objectives are its compressed model's measurement, named as before
    measured = {"compressed": {"score": 0.6, "size_bytes": 10}, "source": {"score": 0.9}, "size_ratio": 0.5}
    assert [summary_value(measured, k) for k in ("score", "size_bytes", "size_ratio")] == [0.6, 10, 0.5]


# -- a compression study: objectives from the summaries, the Pareto set ---------------------------
def test_pareto_set_is_the_non_dominated_trials(driven):
    from ptmlab import studies
    from ptmlab.db import session_scope

    url, _, study_id = driven
    with session_scope(url) as s:
        status = studies.study_status(s, study_id, url=url)
    trials = status["trials"]
    assert status["status"] == "finished" and len(trials) == N_TRIALS
    assert all(t["state"] == "complete" and t["values"] is not None and len(t["values"]) == 2 for t in trials)
    assert status["best"] is None and all(t["value"] is None for t in trials)
    by_hand = non_dominated({t["number"]: tuple(t["values"]) for t in trials})
    assert set(status["pareto"]) == by_hand and 1 <= len(by_hand) < N_TRIALS
    assert {t["number"] for t in trials if t["pareto"]} == by_hand
    # The values are the summaries' fields, as the trials' settings made them.
    for t in trials:
        ratio, epochs = t["params"]["compression.param_ratio"], t["params"]["compression.finetune_epochs"]
        assert t["values"] == [
            pytest.approx(0.5 + 0.3 * ratio**0.5 + 0.1 * epochs, abs=1e-6),
            int(4_000_000 * ratio) + 100_000,
        ]


def test_a_trial_whose_summary_lacks_an_objective_fails(tmp_path):
    import sqlalchemy as sa

    from ptmlab import studies
    from ptmlab.db import QUEUED, SUCCEEDED, Job, dispose_engines, get_sessionmaker
    from ptmlab.results import new_result
    from ptmlab.studies.storage import forget_storages

    url = sqlite_url(tmp_path)
    plan = studies.plan_study(
        studies.StudySpec(
            stage="sleep", overrides=SLEEP_TRADEOFF, **OBJECTIVES, n_trials=1, n_parallel=1, queue="parked"
        )
    )
    with get_sessionmaker(url)() as s:
        study = studies.create_study(s, plan, url=url, driver_id="test")
        job = s.scalar(sa.select(Job).where(Job.study_id == study.id, Job.status == QUEUED))
        job.status = SUCCEEDED
        s.add(
            new_result(
                {"stage": "sleep", "seed": 42, "wall_time_s": 1.0, "seconds": 1.0, "score": 0.5},
                job_id=job.id,
                tags=job.tags,
            )
        )
        s.commit()
        studies.advance_study(s, study.id, url=url, driver_id="test")
        status = studies.study_status(s, study.id, url=url)
    assert [t["state"] for t in status["trials"]] == ["fail"] and status["pareto"] == []
    forget_storages()
    dispose_engines()


# -- the pages ----------------------------------------------------------------------------------
def _client(url: str, home: Path, monkeypatch) -> TestClient:
    from ptmlab.api.app import create_app
    from ptmlab.settings import Settings

    monkeypatch.setenv("PTMLAB_HOME", str(home))
    return TestClient(create_app(Settings(home=home, database_url=url)))


def test_study_page_shows_the_pareto_front(driven, monkeypatch):
    url, home, study_id = driven
    client = _client(url, home, monkeypatch)
    view = client.get(f"/api/v1/views/studies/{study_id}").json()
    assert view["objectives"] == ["score", "size_bytes"] and view["directions"] == ["maximize", "minimize"]
    assert view["pareto"] and all(t["pareto"] == (t["number"] in view["pareto"]) for t in view["trials"])
    assert view["history"] == [] and view["best"] is None
    assert view["importances"] and "first objective" in view["importances_note"]
    page = client.get(f"/studies/{study_id}")
    assert page.status_code == 200 and 'id="pareto-chart"' in page.text
    assert f'href="/compression?study={study_id}"' in page.text
    listing = client.get("/studies")
    assert "score · size_bytes" in listing.text


def test_compression_view_shows_the_study_front(driven, monkeypatch):
    from ptmlab.db import session_scope
    from ptmlab.views.compression import compression_view

    url, home, study_id = driven
    with session_scope(url) as s:
        view = compression_view(s, study_id=study_id)
        everything = compression_view(s)
    assert len(everything["points"]) == N_TRIALS  # one study here: the filter keeps all of them
    study = view["study"]
    assert study["id"] == study_id and study["objectives"] == ["score", "size_bytes"]
    on_front = {p["job_id"] for p in view["points"] if p["study_pareto"]}
    assert on_front == {t["job_id"] for t in study["pareto_trials"]} and len(on_front) == len(study["pareto_trials"])
    assert all(p["trial"] is not None for p in view["points"])
    # The study's front on (score, size) is the page's own front on the size axis.
    assert {p["id"] for p in view["points"] if p["study_pareto"]} == set(view["fronts"]["size_bytes"])
    client = _client(url, home, monkeypatch)
    r = client.get(f"/api/v1/views/compression?study={study_id}")
    assert r.status_code == 200 and r.json()["study"]["id"] == study_id
    assert client.get("/api/v1/views/compression?study=nosuchstudy").status_code == 404
    page = client.get(f"/compression?study={study_id}")
    assert page.status_code == 200 and 'name="study"' in page.text


# -- through a real API and a real worker -------------------------------------------------------
def test_a_sleep_tradeoff_study_through_the_queue(tmp_path, spawn_worker):
    from api_server import LiveApi

    api = LiveApi(sqlite_url(tmp_path), tmp_path / "home", tmp_path)
    api.start()
    try:
        r = httpx.post(
            f"{api.base}/api/v1/studies",
            timeout=60,
            json={
                "stage": "sleep",
                "overrides": ["stage.seconds=0.25", *SLEEP_TRADEOFF],
                **OBJECTIVES,
                "sampler": "nsga2",
                "n_trials": 4,
                "n_parallel": 2,
                "seed": 0,
            },
        )
        assert r.status_code == 201, r.text
        spawn_worker(api.db_url, tmp_path / "home")

        def finished():
            status = httpx.get(f"{api.base}/api/v1/studies/{r.json()['id']}", timeout=30).json()
            return status if status["status"] == "finished" else None

        status = wait_until(finished, 120, "the study to finish")
    finally:
        api.kill()
    trials = status["trials"]
    assert len(trials) == 4 and all(t["state"] == "complete" for t in trials), trials
    for t in trials:  # the sleep stage's summary: score = quality, size_bytes as searched
        assert t["values"] == [pytest.approx(t["params"]["stage.quality"]), t["params"]["stage.size_bytes"]]
    assert set(status["pareto"]) == non_dominated({t["number"]: tuple(t["values"]) for t in trials})

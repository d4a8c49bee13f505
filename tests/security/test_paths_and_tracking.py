"""Issue 41, defects 2 and 3: every path a submitted job names is a path under the roots, relative
ones resolved against PTMLAB_HOME (where a worker runs its jobs), and a job writes to the worker's
configured tracking store, never to one the caller chose."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

API = "/api/v1"
SECRET = "POSTGRES_PASSWORD=hunter2-planted"


@pytest.fixture()
def api(tmp_path):
    from ptmlab.api.app import create_app
    from ptmlab.db import dispose_engines
    from ptmlab.settings import Settings

    home = tmp_path / "home"
    home.mkdir()
    settings = Settings(home=home, database_url=f"sqlite:///{tmp_path / 'platform.db'}")
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        client.home = home
        yield client
    dispose_engines()


def submit(api, *overrides, stage="finetune"):
    return api.post(f"{API}/jobs", json={"stage": stage, "overrides": list(overrides)})


@pytest.mark.parametrize(
    "override",
    [
        "tracking.uri=sqlite:////elsewhere/pwn.db",
        "tracking.uri=http://127.0.0.1:9/",
        "++tracking.uri=http://127.0.0.1:9/",
        "paths.home=x",
        "paths.cache_dir=cache2",
        "run_dir=somewhere",
    ],
)
def test_the_platform_keys_cannot_be_submitted(api, override):
    r = submit(api, "task=glue/sst2", override)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "forbidden_override"
    assert "set by the worker" in r.json()["error"]["message"]
    assert api.get(f"{API}/jobs").json()["total"] == 0


def test_the_experiment_name_still_can(api):
    assert submit(api, "task=glue/sst2", "tracking.experiment=mine").status_code == 201


def test_relative_paths_resolve_under_home_and_stay_there(api, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "export").mkdir()
    (api.home / "link").symlink_to(outside)
    refused = {
        "backbone=link": "outside the allowed roots",  # a symlink out of home
        "backbone=link/export": "outside the allowed roots",
        "task.data.test=../outside/x.conll": "climbs out",
        "task.data.test=a/../../x.conll": "climbs out",
        "task.data.files.train=../../../etc/passwd": "climbs out",
    }
    for override, why in refused.items():
        task = "task=glue/sst2" if "files" in override else "task=ner"
        r = (
            submit(api, task, "task.data.train=t.conll", "task.data.dev=d.conll", override)
            if task == "task=ner"
            else submit(api, task, override)
        )
        assert r.status_code == 422 and why in r.text, (override, r.text)
    # Relative names under home are what they say they are: home's own files.
    for override in ("backbone=.", "backbone=evil_backbone"):
        assert submit(api, "task=glue/sst2", override).status_code == 201, override


def test_set_runtime_paths_under_a_worker_tracks_to_the_configured_store(tmp_path, monkeypatch):
    from ptmlab.config import compose_config, set_runtime_paths
    from ptmlab.settings import get_settings

    monkeypatch.setenv("PTMLAB_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("PTMLAB_MLFLOW_TRACKING_URI", raising=False)
    get_settings.cache_clear()
    try:
        cfg = compose_config(["stage=sleep", "tracking.uri=http://127.0.0.1:9/"])
        assert cfg.tracking.uri == "http://127.0.0.1:9/"  # a local run is the researcher's own
        monkeypatch.setenv("PTMLAB_JOB_ID", "7")
        get_settings.cache_clear()
        assert set_runtime_paths(cfg).tracking.uri == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    finally:
        get_settings.cache_clear()


def test_a_worker_reads_relative_paths_from_home_not_its_own_folder(tmp_path, spawn_worker):
    """The red team's `.env` read: the worker's start-up folder holds a `.env`; a job naming
    `task.data.test=.env` must never read it (the job reads PTMLAB_HOME/.env, which is absent, and
    fails before training), and no file the job leaves holds the secret."""
    from waiting import wait_until

    from ptmlab.db import Job, dispose_engines, get_engine, sessionmaker
    from ptmlab.queue import submit_job

    home, start_dir = tmp_path / "home", tmp_path / "worker_checkout"
    home.mkdir()
    start_dir.mkdir()
    (start_dir / ".env").write_text(f"{SECRET} O\n")
    (home / "ner").mkdir()
    for split in ("train", "dev"):
        (home / "ner" / f"{split}.conll").write_text("Paris B-LOC\nis O\n\nBob B-PER\n")
    url = f"sqlite:///{tmp_path / 'platform.db'}"
    Session = sessionmaker(bind=get_engine(url), expire_on_commit=False)
    with Session() as s:
        job_id = submit_job(
            s,
            stage="finetune",
            overrides=[
                "task=ner",
                "task.data.train=ner/train.conll",
                "task.data.dev=ner/dev.conll",
                "task.data.test=.env",
                "model=bert_tiny",
                "backbone=random",
                "tokenizer.vocab_size=60",
            ],
        ).id
    spawn_worker(url, home, cwd=start_dir)

    def ended():
        with Session() as s:
            return s.get(Job, job_id).status in ("failed", "succeeded")

    wait_until(ended, 120, "the job to end")
    with Session() as s:
        job = s.get(Job, job_id)
        assert job.status == "failed", job.error
        # Read from home, where there is none (the worker's own `.env` would have parsed as a split).
        assert "error[data_error]: .env: CoNLL file not found (task.data.test)" in (job.error or ""), job.error
    leaked = [p for p in home.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert not leaked, leaked
    dispose_engines()
    assert Path(start_dir / ".env").read_text().startswith(SECRET)


def test_the_worker_checks_an_api_job_again_when_it_starts(tmp_path, spawn_worker):
    """A symlink planted in home after the API accepted a job: the worker re-applies the API's
    checks to the jobs the API queued and refuses it before it starts; the same override queued
    from the researcher's own machine runs (it names the researcher's own files)."""
    from waiting import wait_until

    from ptmlab.api.app import create_app
    from ptmlab.db import Job, dispose_engines, get_sessionmaker
    from ptmlab.queue import submit_job
    from ptmlab.settings import Settings

    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    url = f"sqlite:///{tmp_path / 'platform.db'}"
    with TestClient(create_app(Settings(home=home, database_url=url)), base_url="http://localhost") as api:
        r = submit(api, "stage.seconds=0.1", "run_name=planted/run", stage="sleep")
        assert r.status_code == 201, r.text
    remote_id = r.json()["id"]
    (home / "planted").symlink_to(outside)  # after the API looked
    Session = get_sessionmaker(url)
    with Session() as s:
        local_id = submit_job(s, stage="sleep", overrides=["stage.seconds=0.1", "run_name=planted/run"]).id
    spawn_worker(url, home)

    def ended():
        with Session() as s:
            return all(s.get(Job, i).status in ("failed", "succeeded") for i in (remote_id, local_id))

    wait_until(ended, 90, "both jobs to end")
    with Session() as s:
        remote, local = s.get(Job, remote_id), s.get(Job, local_id)
        assert remote.status == "failed" and "refused before start" in remote.error, remote.error
        assert "outside the allowed roots" in remote.error and remote.attempts <= 1
        assert local.status == "succeeded", local.error
        assert remote.submitted_remotely and not local.submitted_remotely
    dispose_engines()

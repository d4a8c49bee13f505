"""A job's name, tags and note: set through PATCH /api/v1/jobs/{id}, `ptmlab label` and kept in
the database (migration 0005) on SQLite and PostgreSQL; labels never change what a job runs,
a pipeline keeps its names unique, bad input is a one-line 4xx."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from ptmlab.api.app import create_app
from ptmlab.settings import Settings

API = "/api/v1"


@pytest.fixture()
def client(db_url, tmp_path):
    from ptmlab.db import dispose_engines

    with TestClient(create_app(Settings(home=tmp_path / "home", database_url=db_url))) as c:
        yield c
    dispose_engines()


def test_rename_tag_untag_and_note_round_trip(client):
    job = client.post(
        f"{API}/jobs",
        json={
            "stage": "sleep",
            "overrides": ["stage.seconds=0.1"],
            "queue": "parked",
            "tags": {"origin": "form", "old": "x"},
        },
    ).json()
    assert job["name"] is None and job["note"] is None
    r = client.patch(
        f"{API}/jobs/{job['id']}",
        json={"name": "warmup-ablation", "tags": {"idea": "warmup", "old": None}, "note": "diverged after epoch 2"},
    )
    assert r.status_code == 200, r.text
    got = client.get(f"{API}/jobs/{job['id']}").json()
    assert got["name"] == "warmup-ablation" and got["note"] == "diverged after epoch 2"
    assert got["tags"] == {"origin": "form", "idea": "warmup"}  # merged; null removed "old"
    assert got["overrides"] == job["overrides"] and got["status"] == "queued"  # labels change nothing else
    # Only what is given changes: a tag alone keeps the name and the note; an empty note clears it.
    client.patch(f"{API}/jobs/{job['id']}", json={"tags": {"round": "2"}})
    got = client.get(f"{API}/jobs/{job['id']}").json()
    assert got["name"] == "warmup-ablation" and got["note"] == "diverged after epoch 2" and got["tags"]["round"] == "2"
    client.patch(f"{API}/jobs/{job['id']}", json={"note": ""})
    assert client.get(f"{API}/jobs/{job['id']}").json()["note"] is None


def test_pipeline_names_stay_unique_and_bad_input_is_refused(client):
    spec = {
        "name": "pair",
        "defaults": {"queue": "parked"},
        "jobs": [{"name": "a", "stage": "sleep"}, {"name": "b", "stage": "sleep", "depends_on": ["a"]}],
    }
    pipeline = client.post(f"{API}/pipelines", json={"spec": spec}).json()
    a, b = (j["job_id"] for j in pipeline["jobs"])
    r = client.patch(f"{API}/jobs/{b}", json={"name": "a"})
    assert r.status_code == 409 and "named 'a'" in r.json()["error"]["message"]
    assert client.patch(f"{API}/jobs/{b}", json={"name": "b2"}).status_code == 200
    assert client.patch(f"{API}/jobs/{a}", json={"colour": "red"}).status_code == 422  # unknown field
    assert client.patch(f"{API}/jobs/{a}", json={"name": "x" * 201}).status_code == 422
    assert client.patch(f"{API}/jobs/{a}", json={"tags": {"k": "a\x00b"}}).status_code == 422
    assert client.patch(f"{API}/jobs/999999", json={"name": "z"}).status_code == 404


def test_ptmlab_label(db_url, capsys):
    from ptmlab.cli import main
    from ptmlab.db import dispose_engines, session_scope
    from ptmlab.queue import get_job, submit_job

    with session_scope(db_url) as s:
        job_id = submit_job(s, stage="sleep", overrides=["stage.seconds=0.1"], queue="parked", tags={"old": "1"}).id

    def cli(*argv, command="label") -> tuple[int, str, str]:
        try:
            main([command, "--database-url", db_url, *argv])
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = cli(
        str(job_id), "--name", "lr-small", "--tag", "idea=warmup", "--untag", "old", "--note", "baseline"
    )
    assert code == 0 and out.strip() == f"job {job_id}: name lr-small; idea=warmup; note: baseline"
    code, _, err = cli(str(job_id), "--tag", "novalue")
    assert code == 2 and "--tag 'novalue' is not key=value" in err and err.count("\n") == 1
    # submit reads --tag as label does (it was a ValueError traceback)
    code, _, err = cli("--tag", "novalue", "stage=sleep", command="submit")
    assert code == 2 and "--tag 'novalue' is not key=value" in err and err.count("\n") == 1
    with session_scope(db_url) as s:
        job = get_job(s, job_id)
        assert (job.name, job.tags, job.note) == ("lr-small", {"idea": "warmup"}, "baseline")
    dispose_engines()

"""The REST API in-process (FastAPI's TestClient) on a real database: round trips, validation,
auth, body limits. Live-server tests (restart mid-sweep, schemathesis) are in test_api_live.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ptmlab import queue
from ptmlab.api.app import create_app
from ptmlab.db import session_scope
from ptmlab.settings import Settings

API = "/api/v1"


def make_client(tmp_path: Path, url: str | None = None, **settings) -> TestClient:
    url = url or f"sqlite:///{tmp_path / 'platform.db'}"
    s = Settings(home=tmp_path / "home", database_url=url, data_dir=tmp_path / "data", **settings)
    return TestClient(create_app(s))


@pytest.fixture()
def client(tmp_path):
    from ptmlab.db import dispose_engines

    with make_client(tmp_path) as c:
        yield c
    dispose_engines()


def sleep_job(client, *extra, **body):
    r = client.post(f"{API}/jobs", json={"stage": "sleep", "overrides": ["stage.seconds=0.1", *extra], **body})
    assert r.status_code == 201, r.text
    return r.json()


def test_submit_list_get_cancel_retry_round_trip(client):
    a = sleep_job(client, seed=1, tags={"who": "test"})
    b = sleep_job(client, priority=5)
    assert a["status"] == "queued" and a["seed"] == 1 and a["tags"] == {"who": "test"}
    assert client.get(f"{API}/jobs/{a['id']}").json()["overrides"] == ["stage.seconds=0.1"]

    page = client.get(f"{API}/jobs", params={"limit": 1}).json()
    assert page["total"] == 2 and [j["id"] for j in page["jobs"]] == [b["id"]]  # newest first
    page2 = client.get(f"{API}/jobs", params={"limit": 1, "offset": 1}).json()
    assert [j["id"] for j in page2["jobs"]] == [a["id"]]
    assert client.get(f"{API}/jobs", params={"stage": "sleep", "status": "queued"}).json()["total"] == 2
    assert client.get(f"{API}/jobs", params={"stage": "pretrain"}).json()["total"] == 0

    cancelled = client.post(f"{API}/jobs/{a['id']}/cancel").json()
    assert cancelled["status"] == "cancelled"
    assert client.get(f"{API}/jobs", params={"status": "cancelled"}).json()["total"] == 1
    again = client.post(f"{API}/jobs/{a['id']}/cancel")
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    assert client.post(f"{API}/jobs/{a['id']}/retry").json()["status"] == "queued"
    retry_queued = client.post(f"{API}/jobs/{b['id']}/retry")
    assert retry_queued.status_code == 409, retry_queued.text

    missing = client.get(f"{API}/jobs/999999")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert client.get(f"{API}/jobs/{a['id']}/attempts").json() == []
    log = client.get(f"{API}/jobs/{a['id']}/logs").json()
    assert log["text"] == "" and log["attempt"] is None


def test_logs_and_attempts_after_a_real_worker_run(tmp_path, spawn_worker):
    from ptmlab.db import dispose_engines

    url = f"sqlite:///{tmp_path / 'platform.db'}"
    with make_client(tmp_path, url) as client:
        job = sleep_job(client, "+stage.message=hello-from-the-job")
        worker = spawn_worker(url, tmp_path / "home", "--burst")
        assert worker.wait(timeout=90) == 0, Path(worker.log_path).read_text()[-2000:]
        done = client.get(f"{API}/jobs/{job['id']}").json()
        assert done["status"] == "succeeded", done
        attempts = client.get(f"{API}/jobs/{job['id']}/attempts").json()
        assert [a["number"] for a in attempts] == [1] and attempts[0]["exit_code"] == 0
        full = client.get(f"{API}/jobs/{job['id']}/logs").json()
        assert full["size"] > 0 and full["offset"] == full["size"] and full["attempt"] == 1
        rest = client.get(f"{API}/jobs/{job['id']}/logs", params={"offset": full["size"] - 5}).json()
        assert rest["text"] == full["text"][-5:]
        tail = client.get(f"{API}/jobs/{job['id']}/logs", params={"tail": 1}).json()
        assert tail["text"] and full["text"].endswith(tail["text"])
        results = client.get(f"{API}/results", params={"kind": "sleep"}).json()
        assert results["total"] == 1 and results["results"][0]["job_id"] == job["id"]
        workers = client.get(f"{API}/workers").json()
        assert len(workers) == 1 and workers[0]["last_heartbeat"] and workers[0]["seconds_since_heartbeat"] >= 0
    dispose_engines()


def test_submit_and_list_on_postgres(tmp_path, postgres_url):
    from ptmlab.db import dispose_engines

    with make_client(tmp_path, postgres_url) as client:
        assert client.get("/healthz").json() == {"status": "ok", "database": "postgresql"}
        ids = [sleep_job(client, seed=s)["id"] for s in range(3)]
        page = client.get(f"{API}/jobs", params={"status": "queued"}).json()
        assert page["total"] == 3 and sorted(j["id"] for j in page["jobs"]) == sorted(ids)
        # Values PostgreSQL cannot store or compare are the caller's error, not a 500.
        assert client.get(f"{API}/jobs", params={"queue": "a\x00b"}).status_code == 422
        sweep = client.post(f"{API}/sweeps", json={"overrides": ["stage=sleep", "seed=range(0,4)"]}).json()
        assert sweep["count"] == 4
        assert client.get(f"{API}/jobs", params={"sweep_id": sweep["id"]}).json()["total"] == 4
    dispose_engines()


def test_sweep_expansion_dry_run_and_submit(client):
    dry = client.post(
        f"{API}/sweeps",
        json={"overrides": ["stage=sleep", "stage.seconds=0.1,0.2", "seed=range(0,3)"], "dry_run": True},
    ).json()
    assert dry["count"] == 6 and dry["id"] is None
    assert dry["jobs"][0] == ["stage=sleep", "stage.seconds=0.1", "seed=0"]
    assert {tuple(j) for j in dry["jobs"]} == {
        ("stage=sleep", f"stage.seconds={s}", f"seed={n}") for s in ("0.1", "0.2") for n in range(3)
    }
    assert client.get(f"{API}/jobs").json()["total"] == 0  # a dry run queues nothing

    r = client.post(
        f"{API}/sweeps",
        json={"overrides": ["stage=sleep", "seed=choice(3,4)", "stage.seconds=0.1,0.2"], "name": "s1", "priority": 2},
    )
    assert r.status_code == 201, r.text
    sweep = r.json()
    assert sweep["count"] == 4 and len(sweep["job_ids"]) == 4
    got = client.get(f"{API}/sweeps/{sweep['id']}").json()
    assert got["count"] == 4 and sorted(got["job_ids"]) == sorted(sweep["job_ids"]) and got["name"] == "s1"
    jobs = client.get(f"{API}/jobs", params={"sweep_id": sweep["id"]}).json()["jobs"]
    assert sorted(j["seed"] for j in jobs) == [3, 3, 4, 4] and {j["priority"] for j in jobs} == {2}
    assert client.get(f"{API}/sweeps/nope").status_code == 404


def test_sweep_of_expanded_jobs_as_the_hydra_launcher_sends_it(client):
    jobs = [["stage=sleep", "seed=0"], ["stage=sleep", "stage.seconds=0.2", "seed=1"]]
    r = client.post(f"{API}/sweeps", json={"jobs": jobs, "name": "expanded"})
    assert r.status_code == 201, r.text
    queued = client.get(f"{API}/jobs", params={"sweep_id": r.json()["id"]}).json()["jobs"]
    assert sorted((j["seed"], tuple(j["overrides"])) for j in queued) == [(0, ()), (1, ("stage.seconds=0.2",))]
    assert client.get(f"{API}/sweeps/{r.json()['id']}").json()["spec"]["jobs"] == jobs

    both = client.post(f"{API}/sweeps", json={"jobs": jobs, "overrides": ["stage=sleep"]})
    assert both.status_code == 422 and "not both" in both.json()["error"]["message"]
    assert client.post(f"{API}/sweeps", json={}).status_code == 422
    bad = client.post(f"{API}/sweeps", json={"jobs": [["stage=sleep"], ["stage=sleep", "+x._target_=os.system"]]})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "forbidden_override"
    wrong = client.post(f"{API}/sweeps", json={"jobs": [["stage=sleep"], ["stage=sleep", "model=nope"]]})
    assert wrong.status_code == 422 and "model=nope" in wrong.json()["error"]["message"]
    assert client.get(f"{API}/jobs").json()["total"] == 2


def test_sweep_with_an_incompatible_combination_is_refused_naming_it(client):
    # The cross product is 6 jobs; gpt_tiny (a decoder) cannot train the default objective (mlm).
    r = client.post(
        f"{API}/sweeps", json={"overrides": ["model=bert_tiny,gpt_tiny", "seed=range(0,3)"], "dry_run": True}
    )
    assert r.status_code == 422
    msg = r.json()["error"]["message"]
    assert "model=gpt_tiny" in msg and "objective=mlm" in msg
    ok = client.post(
        f"{API}/sweeps", json={"overrides": ["model=bert_tiny,bert_mini", "seed=range(0,3)"], "dry_run": True}
    ).json()
    assert ok["count"] == 6
    assert client.post(f"{API}/sweeps", json={"overrides": ["lr=interval(0,1)"], "dry_run": True}).status_code == 422


@pytest.mark.parametrize(
    "override",
    [
        "+model.backbone._target_=os.system",
        "model.backbone._target_=builtins.eval",
        "~model.backbone._target_",
        "tags.x=_target_",
        "hydra.run.dir=/tmp/elsewhere",
        "+hydra.job.chdir=true",
        "hydra/launcher=basic",
        "data.path=/etc/passwd",
        "data.path=../../outside",
        "tags.x=${oc.env:HOME}",
        "+tags.x={a:/etc/passwd}",
        "+tags.x=[ok,/root]",
        "+tags.x='~/.ssh'",
        "+experiment@_global_.hydra.job=x",
    ],
)
def test_forbidden_overrides_are_refused_with_422_naming_them(client, override):
    r = client.post(f"{API}/jobs", json={"stage": "sleep", "overrides": [override]})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "forbidden_override"
    assert override in r.json()["error"]["message"]
    sweep = client.post(f"{API}/sweeps", json={"overrides": ["stage=sleep", override], "dry_run": True})
    assert sweep.status_code == 422 and sweep.json()["error"]["code"] == "forbidden_override"
    assert client.get(f"{API}/jobs").json()["total"] == 0


def test_paths_inside_the_allowed_roots_are_accepted(client, tmp_path):
    inside = tmp_path / "data" / "glue" / "sst2"
    sleep_job(client, f"+stage.input={inside}")
    sleep_job(client, "+stage.input=relative/folder")


def test_unknown_option_key_and_group_give_hydras_message(client):
    r = client.post(f"{API}/jobs", json={"overrides": ["model=nope"]})
    assert r.status_code == 422 and r.json()["error"]["code"] == "config_error"
    assert "Could not find 'model/nope'" in r.json()["error"]["message"] and "bert_tiny" in r.json()["error"]["message"]
    r = client.post(f"{API}/jobs", json={"stage": "sleep", "overrides": ["stage.no_such_key=1"]})
    assert r.status_code == 422 and "stage.no_such_key" in r.json()["error"]["message"]
    r = client.post(f"{API}/jobs", json={"overrides": ["nogroup=x"]})
    assert r.status_code == 422 and "nogroup" in r.json()["error"]["message"]
    r = client.post(f"{API}/jobs", json={"overrides": ["model=gpt_tiny", "objective=mlm"]})
    assert r.status_code == 422 and "objective=mlm" in r.json()["error"]["message"]
    r = client.post(f"{API}/jobs", json={"stage": "sleep", "surprise": 1})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"


def test_pipelines_by_name_inline_and_refused(client):
    dry = client.post(f"{API}/pipelines", json={"name": "sleep_graph", "dry_run": True}).json()
    assert dry["count"] == 6 and client.get(f"{API}/jobs").json()["total"] == 0
    r = client.post(f"{API}/pipelines", json={"name": "sleep_graph"})
    assert r.status_code == 201, r.text
    created = r.json()
    report = next(j for j in created["jobs"] if j["name"] == "report")
    assert len(client.get(f"{API}/jobs/{report['job_id']}").json()["depends_on"]) == 4
    assert client.get(f"{API}/pipelines/{created['id']}").json()["count"] == 6

    inline = {
        "name": "two",
        "jobs": [{"name": "a", "stage": "sleep"}, {"name": "b", "stage": "sleep", "depends_on": ["a"]}],
    }
    assert client.post(f"{API}/pipelines", json={"spec": inline}).json()["count"] == 2
    bad = {"name": "bad", "jobs": [{"name": "a", "stage": "sleep", "overrides": ["+x._target_=os.system"]}]}
    assert client.post(f"{API}/pipelines", json={"spec": bad}).status_code == 422
    assert client.post(f"{API}/pipelines", json={"name": "no_such_pipeline"}).status_code in (404, 422)
    assert client.post(f"{API}/pipelines", json={"name": "../../etc"}).status_code == 422


def test_token_guards_mutating_routes_only(tmp_path):
    from ptmlab.db import dispose_engines

    with make_client(tmp_path, api_token="s3cret") as client:
        body = {"stage": "sleep"}
        r = client.post(f"{API}/jobs", json=body)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        assert client.post(f"{API}/jobs", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.post(f"{API}/sweeps", json={"overrides": ["stage=sleep"]}).status_code == 401
        assert client.post(f"{API}/jobs/1/cancel").status_code == 401
        ok = client.post(f"{API}/jobs", json=body, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 201
        assert client.get(f"{API}/jobs").json()["total"] == 1  # reads need no token
        assert client.get(f"{API}/jobs/{ok.json()['id']}").status_code == 200
        assert client.get("/healthz").status_code == 200
    dispose_engines()


def test_body_too_large_is_413(client):
    big = {"stage": "sleep", "overrides": ["stage.seconds=0.1"], "tags": {"x": "y" * 400}, "name": "n" * 150}
    assert client.post(f"{API}/jobs", json=big).status_code == 201
    huge = "{" + '"pad": "' + "z" * (300 * 1024) + '"}'
    r = client.post(f"{API}/jobs", content=huge, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"

    def chunks():  # no Content-Length: counted while streaming
        for _ in range(40):
            yield b"a" * 10_000

    r = client.post(f"{API}/jobs", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413


def test_catalogue_results_and_leaderboard(client, tmp_path):
    cat = client.get(f"{API}/catalogue").json()
    assert "bert_tiny" in cat["groups"]["model"] and "glue/sst2" in cat["groups"]["task"]
    assert cat["defaults"]["stage"] == "pretrain" and cat["defaults"]["model"] == "bert_tiny"
    assert cat["defaults"]["task"] is None
    assert "objective" in cat["stages"]["pretrain"] and cat["stages"]["sleep"] == []
    assert "sleep_graph" in cat["pipelines"] and "pipeline" not in cat["groups"]

    from ptmlab.results import record_result

    url = client.app.state.database_url
    with session_scope(url) as s:
        for seed, acc in ((1, 0.80), (2, 0.90)):
            record_result(
                s,
                {
                    "stage": "finetune",
                    "model": "bert_tiny",
                    "objective": "mlm",
                    "adaptation": "full",
                    "task": "sst2",
                    "seed": seed,
                    "metrics": {"accuracy": acc},
                    "main_score": acc,
                },
                sweep_id="sw1",
                tags={"exp": "a"},
            )
        record_result(s, {"stage": "pretrain", "seed": 1}, tags={"exp": "b"})
    assert client.get(f"{API}/results").json()["total"] == 3
    assert client.get(f"{API}/results", params={"kind": "finetune"}).json()["total"] == 2
    assert client.get(f"{API}/results", params={"tag": "exp=b"}).json()["total"] == 1
    assert client.get(f"{API}/results", params={"sweep_id": "sw1", "limit": 1}).json()["total"] == 2
    assert len(client.get(f"{API}/results", params={"sweep_id": "sw1", "limit": 1}).json()["results"]) == 1
    assert client.get(f"{API}/results", params={"tag": "nokeyvalue"}).status_code == 422
    # the views' tag syntax (key=value[,key=value], spaces around key and value dropped), repeatable here
    assert client.get(f"{API}/results", params={"tag": " exp = b "}).json()["total"] == 1
    bad = client.get(f"{API}/results", params=[("tag", "exp=a"), ("tag", "nokey")])
    assert bad.status_code == 422 and "'nokey' is not key=value" in bad.json()["error"]["message"]
    board = client.get(f"{API}/results/glue").json()
    assert [t["task"] for t in board["tasks"]] == ["sst2"] and len(board["rows"]) == 1
    row = board["rows"][0]
    assert row["config"] == {"model": "bert_tiny", "objective": "mlm", "adaptation": "full"}
    # The dashboard's leaderboard view under a second name: GLUE's 0-100 scale, the rows behind each cell.
    cell = row["cells"]["sst2"]
    assert cell["n"] == 2 and cell["mean"] == pytest.approx(85.0) and len(cell["result_ids"]) == 2
    assert row["glue_average"] == pytest.approx(85.0)
    assert board == client.get(f"{API}/views/leaderboard").json()
    assert client.get(f"{API}/results/glue", params={"tag": "exp=b"}).json()["rows"] == []


def test_openapi_has_every_route_with_examples(client):
    spec = client.get("/openapi.json").json()
    paths = set(spec["paths"])
    for p in (
        "/api/v1/jobs",
        "/api/v1/jobs/{job_id}",
        "/api/v1/jobs/{job_id}/cancel",
        "/api/v1/jobs/{job_id}/retry",
        "/api/v1/jobs/{job_id}/logs",
        "/api/v1/jobs/{job_id}/attempts",
        "/api/v1/sweeps",
        "/api/v1/sweeps/{sweep_id}",
        "/api/v1/pipelines",
        "/api/v1/workers",
        "/api/v1/catalogue",
        "/api/v1/results",
        "/api/v1/results/{benchmark}",
        "/healthz",
    ):
        assert p in paths, p
    schemas = spec["components"]["schemas"]
    for name in ("JobSubmit", "SweepSubmit", "PipelineSubmit", "JobOut", "WorkerOut", "ErrorOut"):
        assert schemas[name].get("examples"), name


def test_api_process_never_imports_torch(tmp_path):
    code = f"""
import sys
from fastapi.testclient import TestClient
from ptmlab.api.app import create_app
from ptmlab.settings import Settings
c = TestClient(create_app(Settings(home={str(tmp_path / "h")!r}, database_url='sqlite:///{tmp_path}/p.db')))
assert c.post('/api/v1/jobs', json={{'overrides': ['stage=pretrain', 'model=bert_tiny']}}).status_code == 201
assert c.post('/api/v1/sweeps', json={{'overrides': ['model=bert_tiny,bert_mini'], 'dry_run': True}}).status_code == 200
assert c.post('/api/v1/pipelines', json={{'name': 'sleep_graph', 'dry_run': True}}).status_code == 200
for path in ('/api/v1/jobs', '/api/v1/catalogue', '/api/v1/results', '/api/v1/results/glue', '/api/v1/workers'):
    assert c.get(path).status_code == 200, path
bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'lightning_modules', 'lightning')))
print(bad)
assert not bad, bad
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ptmlab_sweep_cli_expands_validates_and_queues(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home"), "PTMLAB_DATABASE_URL": url}
    cli = [sys.executable, "-m", "ptmlab.cli", "sweep"]
    dry = subprocess.run(
        [*cli, "stage=sleep", "seed=range(0,3)", "stage.seconds=0.1,0.2", "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert dry.returncode == 0 and dry.stdout.startswith("6 jobs"), dry.stdout + dry.stderr
    bad = subprocess.run([*cli, "model=bert_tiny,gpt_tiny"], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "model=gpt_tiny" in bad.stderr and "objective=mlm" in bad.stderr
    real = subprocess.run(
        [*cli, "stage=sleep", "seed=range(0,3)", "--name", "cli"], capture_output=True, text=True, env=env, timeout=120
    )
    assert real.returncode == 0 and "3 jobs queued" in real.stdout, real.stdout + real.stderr
    with session_scope(url) as s:
        jobs, total = queue.list_jobs(s)
        assert total == 3 and sorted(j.seed for j in jobs) == [0, 1, 2] and len({j.sweep_id for j in jobs}) == 1


def test_cancel_a_running_job_through_the_api(tmp_path, spawn_worker):
    from waiting import wait_until

    from ptmlab.db import dispose_engines

    url = f"sqlite:///{tmp_path / 'platform.db'}"
    with make_client(tmp_path, url) as client:
        job = client.post(f"{API}/jobs", json={"stage": "sleep", "overrides": ["stage.seconds=60"]}).json()
        worker = spawn_worker(url, tmp_path / "home")
        wait_until(
            lambda: client.get(f"{API}/jobs/{job['id']}").json()["status"] == "running",
            60,
            "the worker to start the job",
        )
        r = client.post(f"{API}/jobs/{job['id']}/cancel")
        assert r.status_code == 200 and r.json()["cancel_requested"] is True
        wait_until(
            lambda: client.get(f"{API}/jobs/{job['id']}").json()["status"] == "cancelled",
            30,
            "the worker to kill the cancelled job",
        )
        assert worker.poll() is None  # the worker itself goes on
    dispose_engines()

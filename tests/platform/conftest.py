"""Platform fixtures: a real PostgreSQL server for the session, fresh databases per test, and
`db_url` that runs a test on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `from pg import ...` for tests/e2e too

from pg import PostgresServer, find_pg_bin, start_postgres


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server on loopback for the whole session; stopped at the end."""
    if find_pg_bin() is None:
        msg = "PostgreSQL server binaries missing (make test installs them: scripts/install_system_deps.sh)"
        if os.environ.get("PTMLAB_REQUIRE_DATA") == "1" or os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def mlflow_server(postgres_server, tmp_path_factory):
    """One `mlflow server` for the session, started with docker-compose.yml's own command (its
    PostgreSQL store on the session's server, artifacts served from a folder); ~15 s to start, so
    it is not waited for here: call `.wait_ready()`. A test that kills it starts it again."""
    from mlflow_server import MlflowServer

    base = tmp_path_factory.mktemp("mlflow-server")
    server = MlflowServer(postgres_server.create_database("mlflow_store"), base / "mlartifacts", base / "server.log")
    yield server
    server.stop()


@pytest.fixture()
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty PostgreSQL database for one test."""
    return postgres_server.create_database()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path) -> str:
    """A fresh platform database URL, once on SQLite (WAL, in tmp_path) and once on PostgreSQL."""
    from ptmlab.db import dispose_engines

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'platform.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    yield url
    dispose_engines()


@pytest.fixture()
def spawn_worker(tmp_path):
    """Start real `ptmlab worker` processes: spawn_worker(db_url, home, "--gpus", "0,1", ...),
    `env` adding to the environment, `warm=True` for the warm-start launcher (default: --cold-start),
    `cwd` the folder it starts in. Each gets a short lease (3 s) and a fast poll; all are killed
    at teardown. Safe to call from several threads (tests/platform/test_kill_matrix.py)."""
    import itertools
    import signal
    import subprocess

    procs: list[subprocess.Popen] = []
    numbers = itertools.count()  # one log file per worker, whichever thread starts it

    def spawn(
        db_url: str,
        home: Path,
        *args: str,
        lease_s: float = 3.0,
        env: dict[str, str] | None = None,
        warm: bool = False,
        cwd: Path | None = None,
    ) -> subprocess.Popen:
        log = open(tmp_path / f"worker-{next(numbers)}.log", "wb")
        env = {
            **os.environ,
            "PTMLAB_HOME": str(home),
            "PTMLAB_DATABASE_URL": db_url,
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        proc = subprocess.Popen(
            # Cold unless asked: a warm launcher costs ~10 s of imports per worker, and most tests start
            # a worker for a job or two (tests/platform/test_warm_start.py covers the warm path).
            [
                sys.executable,
                "-m",
                "ptmlab.cli",
                "worker",
                "--lease-s",
                str(lease_s),
                "--poll-s",
                "0.2",
                *([] if warm else ["--cold-start"]),
                *args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
        )
        proc.log_path = log.name  # for failure messages
        log.close()
        procs.append(proc)
        return proc

    yield spawn
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)

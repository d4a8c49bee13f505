"""`mlflow server` with the flags docker-compose.yml gives it (PostgreSQL backend store, artifacts
served by MLflow), on a free loopback port. One per test session (`mlflow_server` in conftest.py:
it takes ~15 s to migrate and start); a test may kill it and start it again on the same port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from compose_file import rendered
from pg import free_port
from waiting import wait_until


class MlflowServer:
    def __init__(self, backend_uri: str, artifacts: Path, log_path: Path):
        cmd = rendered()["services"]["mlflow"]["command"]
        self.port = free_port()
        replace = {
            "--host": "127.0.0.1",
            "--port": str(self.port),
            "--workers": "1",
            "--backend-store-uri": backend_uri,
            "--artifacts-destination": str(artifacts),
        }
        for flag, value in replace.items():
            cmd[cmd.index(flag) + 1] = value
        self.argv = [str(Path(sys.executable).parent / "mlflow"), *cmd[1:]]
        self.url = f"http://127.0.0.1:{self.port}"
        self.artifacts = artifacts
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )

    def wait_ready(self, timeout: float = 120) -> None:
        def ready():
            if self.proc.poll() is not None:
                pytest.fail(f"mlflow server exited: {self.log_path.read_text()[-3000:]}")
            try:
                return httpx.get(f"{self.url}/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout, "the MLflow server to answer /health", interval=0.5)

    def kill(self) -> None:
        """SIGKILL to the server and its workers (its own process group): no graceful shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=20)

    stop = kill  # a throwaway server: nothing to shut down gracefully

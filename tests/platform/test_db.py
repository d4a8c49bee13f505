"""The platform database: migrations (programmatic, idempotent, race-safe), the models matching
them, SQLite's WAL mode."""

from __future__ import annotations

import subprocess
import sys

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from ptmlab.db import MIGRATIONS_DIR, Base, create_engine, get_engine, migrate

TABLES = {"jobs", "job_dependencies", "attempts", "workers", "sweeps", "pipelines", "results"}


def _head() -> str:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(config).get_current_head()


def test_migrate_creates_schema_at_head_and_is_idempotent(db_url):
    migrate(db_url)
    migrate(db_url)
    engine = create_engine(db_url)
    try:
        assert TABLES <= set(sa.inspect(engine).get_table_names())
        with engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == _head()
            # The migrations and the ORM models describe the same schema.
            # Optuna's tables (migration 0004) are Optuna's models, not ours: compared without them.
            from optuna.storages._rdb.models import BaseModel as OptunaModels

            optuna_tables = set(OptunaModels.metadata.tables)
            ours = {
                "compare_type": True,
                "include_name": lambda name, kind, _parent: not (kind == "table" and name in optuna_tables),
            }
            diff = compare_metadata(MigrationContext.configure(conn, opts=ours), Base.metadata)
            assert optuna_tables <= set(sa.inspect(conn).get_table_names())
        assert diff == []
    finally:
        engine.dispose()


def test_results_contract_columns(db_url):
    engine = get_engine(db_url)
    columns = {c["name"] for c in sa.inspect(engine).get_columns("results")}
    assert {"id", "job_id", "kind", "mlflow_run_id", "sweep_id", "summary", "tags", "created_at"} <= columns


def test_sqlite_runs_in_wal_mode(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    engine = get_engine(url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000


def test_concurrent_migrations_from_processes(db_url):
    """An API and workers starting together all migrate the same fresh database."""
    code = f"from ptmlab.db import migrate; migrate({db_url!r})"
    procs = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
    engine = create_engine(db_url)
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == _head()
    engine.dispose()

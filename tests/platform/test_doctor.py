"""`ptmlab doctor` checks the machine and says what to fix: a migrated database passes; one at an
old revision, an unreachable server or a missing data folder fail with the fix, exit 1."""

from __future__ import annotations

import os
import subprocess
import sys

import sqlalchemy as sa


def doctor(env_overrides: dict[str, str], home) -> subprocess.CompletedProcess:
    env = {**os.environ, "PTMLAB_HOME": str(home), **env_overrides}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "doctor"], env=env, capture_output=True, text=True, timeout=180
    )


def line(out: str, name: str) -> str:
    return next(ln for ln in out.splitlines() if ln[5:].split(" ", 1)[0] == name)


def test_a_ready_machine_passes(tmp_path, data_dir):
    from ptmlab.db import dispose_engines, migrate

    url = f"sqlite:///{tmp_path / 'ptmlab.db'}"
    migrate(url)
    dispose_engines()
    out = doctor({"PTMLAB_DATABASE_URL": url, "PTMLAB_DATA_DIR": str(data_dir)}, tmp_path)
    assert out.returncode == 0, out.stdout
    assert line(out.stdout, "database").startswith("ok") and "migrated" in line(out.stdout, "database")
    assert line(out.stdout, "torch").startswith("ok") and "2.13" in line(out.stdout, "torch")
    assert line(out.stdout, "data").startswith("ok") and out.stdout.strip().endswith("all checks passed")


def test_what_is_wrong_is_named_with_its_fix(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # a database an older ptmlab left behind
        conn.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
        conn.execute(sa.text("INSERT INTO alembic_version VALUES ('0001')"))
    engine.dispose()
    out = doctor({"PTMLAB_DATABASE_URL": url, "PTMLAB_DATA_DIR": str(tmp_path / "nowhere")}, tmp_path)
    assert out.returncode == 1
    db = line(out.stdout, "database")
    assert db.startswith("FAIL") and "revision 0001" in db
    assert "migrates to head" in out.stdout.split(db, 1)[1].splitlines()[1]
    assert line(out.stdout, "data").startswith("FAIL") and "nowhere" in line(out.stdout, "data")
    assert out.stdout.strip().endswith("2 check(s) failed")

    # A PostgreSQL server that is not there: named, with the fix, no traceback.
    out = doctor({"PTMLAB_DATABASE_URL": "postgresql+psycopg://u:secret@127.0.0.1:1/none"}, tmp_path)
    db = line(out.stdout, "database")
    assert out.returncode == 1 and db.startswith("FAIL") and "127.0.0.1:1" in db and "secret" not in out.stdout
    assert "Traceback" not in out.stdout + out.stderr

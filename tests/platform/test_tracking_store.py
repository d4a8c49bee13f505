"""The embedded SQLite MLflow store is created once, whoever opens it first: processes that open a
fresh store at the same moment (a worker starting two jobs on a new PTMLAB_HOME) all find it
complete (ptmlab.tracking.ensure_tracking_store), where MLflow alone has each create its tables
and migrate, and all but one fail (`table ... already exists`, `duplicate column name`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

OPEN_AT_ONCE = textwrap.dedent("""
    import sys, time
    from mlflow.tracking import MlflowClient
    from ptmlab.tracking import ensure_tracking_store
    uri, start = sys.argv[1], float(sys.argv[2])
    while time.time() < start:
        time.sleep(0.001)
    ensure_tracking_store(uri)
    client = MlflowClient(tracking_uri=uri)
    client.create_experiment(sys.argv[3])
    print("opened", flush=True)
""")


def test_processes_opening_a_fresh_store_at_once_all_find_it_complete(tmp_path):
    uri = f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}"
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".mlflow.db.creating").write_bytes(b"half a store")  # a killed builder's leftover
    start = time.time() + 8  # every process has imported MLflow by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AT_ONCE, uri, str(start), f"e{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(3)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], "\n".join(outputs)
    from mlflow.tracking import MlflowClient

    names = {e.name for e in MlflowClient(tracking_uri=uri).search_experiments()}
    assert {"e0", "e1", "e2"} <= names
    assert not (tmp_path / "home" / ".mlflow.db.creating").exists()

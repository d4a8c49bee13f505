"""MLflow on the platform side: the client for a tracking URI, links into the MLflow UI, and the
`mlflow ui` command `ptmlab up` starts. (The science side logs through StageRun in
lightning_modules/runtime/stage_run.py; this package reaches it only through ptmlab.science.)"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ptmlab.settings import Settings, get_settings

_READY_STORES: set[str] = set()  # SQLite stores this process has seen complete


def ensure_tracking_store(tracking_uri: str) -> None:
    """Create an embedded SQLite MLflow store once, atomically, under a file lock beside it.

    MLflow creates a SQLite store's tables and runs its Alembic migrations in whichever process
    opens it first, with no lock: two processes opening a fresh store at once (a worker starting
    two jobs on a new PTMLAB_HOME) both create tables and one fails (`table ... already exists`,
    `duplicate column name`), and a process killed mid-way leaves a half-migrated store that MLflow
    refuses from then on. So the store is built under a temporary name and renamed into place,
    by one process while the others wait on the lock; every ptmlab process that opens the store
    calls this first (ptmlab.run before a stage, `mlflow_client`). A store that exists is left as
    it is (no lock, MLflow not imported); other URIs (a tracking server) pass untouched."""
    if not tracking_uri.startswith("sqlite:///") or tracking_uri in _READY_STORES:
        return
    path = Path(tracking_uri.removeprefix("sqlite:///"))
    if not path.exists():
        from mlflow.tracking import MlflowClient

        from ptmlab.contracts.file_lock import exclusive

        path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive(path.with_name(path.name + ".lock")):
            if not path.exists():
                building = path.with_name(f".{path.name}.creating")
                building.unlink(missing_ok=True)  # left by a process killed while building it
                MlflowClient(tracking_uri=f"sqlite:///{building}").search_experiments(max_results=1)
                os.replace(building, path)
    _READY_STORES.add(tracking_uri)


def mlflow_client(tracking_uri: str | None = None) -> Any:
    """An MlflowClient for `tracking_uri` (default: the settings' resolved URI). MLflow is imported
    here, on first use, so the API starts without it."""
    from mlflow.tracking import MlflowClient

    tracking_uri = tracking_uri or get_settings().resolved_tracking_uri
    ensure_tracking_store(tracking_uri)
    return MlflowClient(tracking_uri=tracking_uri)


def mlflow_ui_url(settings: Settings | None = None) -> str | None:
    """Where an MLflow UI is known to answer: PTMLAB_MLFLOW_UI_URL, which `ptmlab up` sets for the API
    it starts beside its MLflow UI. None otherwise: a guessed port made the dashboard's MLflow button
    point at a UI `ptmlab serve` never started."""
    settings = settings or get_settings()
    return settings.mlflow_ui_url


def mlflow_run_link(run_id: str | None) -> str | None:
    # The MLflow UI resolves a run's experiment itself from this route.
    url = mlflow_ui_url()
    return f"{url.rstrip('/')}/#/runs/{run_id}" if run_id and url else None


def mlflow_ui_command(settings: Settings) -> list[str] | None:
    """`mlflow ui` on loopback for the embedded SQLite store, or None for a remote tracking server."""
    uri = settings.resolved_tracking_uri
    if not uri.startswith("sqlite:"):
        return None
    mlflow = os.path.join(os.path.dirname(sys.executable), "mlflow")
    return [
        mlflow,
        "ui",
        "--backend-store-uri",
        uri,
        "--default-artifact-root",
        settings.artifact_root.as_uri(),
        "--host",
        "127.0.0.1",
        "--port",
        str(settings.mlflow_ui_port),
    ]


def resolve_reference(ref: str) -> tuple[str, str]:
    """(reference the science half understands, tracking URI): `job:<id>` becomes that job's run
    folder (from the platform database), anything else passes; the URI is the platform's."""
    ref = str(ref)
    if ref.startswith("job:"):
        from ptmlab.db import session_scope
        from ptmlab.errors import BackboneError
        from ptmlab.queue import get_job

        if not ref[len("job:") :].isdigit():
            raise BackboneError(f"{ref}: a job reference is job:<integer id>")
        with session_scope() as session:
            job = get_job(session, int(ref[len("job:") :]))
            if not job.run_dir:
                raise BackboneError(f"{ref}: job {job.id} has no run folder yet (status {job.status})")
            ref = job.run_dir
    return ref, get_settings().resolved_tracking_uri


def load_task_model(ref: str, **kwargs: Any) -> Any:
    """`load_task_model` (lightning_modules/artifacts/saved_task_model.py) for any reference the
    platform knows: `job:<id>`, `mlflow:<run_id>` (in ptmlab's tracking store, the embedded one by
    default), a run, export or task-model folder. Imports torch (the science half) on call, never
    at import."""
    from ptmlab.science import load_saved_task_model

    local_ref, uri = resolve_reference(ref)
    return load_saved_task_model(local_ref, kwargs.pop("tracking_uri", None) or uri, **kwargs)

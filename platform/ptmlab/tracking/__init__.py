"""MLflow on the platform side: the client for a tracking URI, links into the MLflow UI, and the
`mlflow ui` command `ptmlab up` starts. (The science side logs through StageRun in
lightning_modules/stages/common.py; this package never imports lightning_modules.)"""

from __future__ import annotations

import os
import sys
from typing import Any

from ptmlab.settings import Settings, get_settings


def mlflow_client(tracking_uri: str | None = None) -> Any:
    """An MlflowClient for `tracking_uri` (default: the settings' resolved URI). MLflow is imported
    here, on first use, so the API starts without it."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri or get_settings().resolved_tracking_uri)


def mlflow_ui_url(settings: Settings | None = None) -> str:
    settings = settings or get_settings()
    return settings.mlflow_ui_url or f"http://{settings.bind_host}:{settings.mlflow_ui_port}"


def mlflow_run_link(run_id: str | None) -> str | None:
    # The MLflow UI resolves a run's experiment itself from this route.
    return f"{mlflow_ui_url().rstrip('/')}/#/runs/{run_id}" if run_id else None


def mlflow_ui_command(settings: Settings) -> list[str] | None:
    """`mlflow ui` on loopback for the embedded SQLite store, or None for a remote tracking server."""
    uri = settings.resolved_tracking_uri
    if not uri.startswith("sqlite:"):
        return None
    mlflow = os.path.join(os.path.dirname(sys.executable), "mlflow")
    return [mlflow, "ui", "--backend-store-uri", uri, "--default-artifact-root", settings.artifact_root.as_uri(),
            "--host", "127.0.0.1", "--port", str(settings.mlflow_ui_port)]


def resolve_reference(ref: str) -> tuple[str, str]:
    """(reference the science half understands, tracking URI): `job:<id>` becomes that job's run
    folder (from the platform database), anything else passes; the URI is the platform's."""
    ref = str(ref)
    if ref.startswith("job:"):
        from ptmlab.db import session_scope
        from ptmlab.errors import BackboneError
        from ptmlab.queue import get_job

        if not ref[len("job:"):].isdigit():
            raise BackboneError(f"{ref}: a job reference is job:<integer id>")
        with session_scope() as session:
            job = get_job(session, int(ref[len("job:"):]))
            if not job.run_dir:
                raise BackboneError(f"{ref}: job {job.id} has no run folder yet (status {job.status})")
            ref = job.run_dir
    return ref, get_settings().resolved_tracking_uri


def load_task_model(ref: str, **kwargs: Any) -> Any:
    """`lightning_modules.stages.load_task_model` for any reference the platform knows: `job:<id>`,
    `mlflow:<run_id>` (in ptmlab's tracking store, the embedded one by default), a run, export or
    task-model folder. Imports torch (the science half) on call, never at import."""
    from lightning_modules.stages import load_task_model as load

    local_ref, uri = resolve_reference(ref)
    return load(local_ref, tracking_uri=kwargs.pop("tracking_uri", None) or uri, **kwargs)

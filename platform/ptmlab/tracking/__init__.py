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

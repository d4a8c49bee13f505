"""What resolving a backbone or a task model reference shares: `job:<id>` refused outside the
platform, an `mlflow:<run_id>` artifact downloaded."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ptmlab.contracts import BackboneError


def refuse_job_ref(ref: str, key: str) -> None:
    """`job:<id>` only means something to the platform: its worker rewrites `key=job:<id>` into
    the parent's run folder when it claims the job (ptmlab/queue/claim.py)."""
    if ref.startswith("job:"):
        raise BackboneError(
            f"{key}={ref} is resolved by a platform worker; run it through the queue "
            f"(ptmlab submit) or pass the parent's run folder"
        )


def download_run_artifact(
    run_id: str, artifact: str, tracking_uri: str, key: str, exclude: tuple[str, ...] = ()
) -> Path:
    """The folder `artifact` of an MLflow run, downloaded to a temporary folder (its entries
    named in `exclude` left out)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    target = Path(tempfile.mkdtemp(prefix="ptmlab-artifact-")) / Path(artifact).name
    target.mkdir()
    try:
        entries = [e.path for e in client.list_artifacts(run_id, artifact) if e.path not in exclude]
        if not entries:
            raise FileNotFoundError(artifact)
        for entry in entries:  # each lands in target/<its base name>
            client.download_artifacts(run_id, entry, str(target))
    except Exception as exc:
        raise BackboneError(
            f"{key}=mlflow:{run_id}: no '{artifact}' artifact in that run ({type(exc).__name__})"
        ) from None
    return target

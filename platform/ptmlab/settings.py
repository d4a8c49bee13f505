"""Process settings, validated at start-up (pydantic-settings, `PTMLAB_` environment prefix)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ptmlab.contracts.secrets import redact_url_passwords


_REPO_ROOT = Path(__file__).resolve().parents[2]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PTMLAB_", extra="ignore")

    home: Path = Field(default=Path(".ptmlab"), description="Everything embedded lives here.")
    database_url: str | None = Field(default=None, description="Default: SQLite in PTMLAB_HOME.")
    mlflow_tracking_uri: str | None = Field(
        default=None, description="Default: $MLFLOW_TRACKING_URI, else SQLite in PTMLAB_HOME."
    )
    data_dir: Path | None = Field(default=None, description="Folder with glue/ senteval/ ud/ corpus/.")
    api_token: str | None = Field(default=None, description="Bearer token for mutating API routes.")
    bind_host: str = "127.0.0.1"
    bind_port: int = 8765
    mlflow_ui_port: int = 5000
    tracking_retry_s: float = Field(
        default=900.0, gt=0,
        description="How long a job keeps retrying an unreachable MLflow server (metrics stay queued) before it fails.",
    )
    mlflow_ui_url: str | None = Field(default=None, description="Link target of the dashboard's MLflow buttons.")
    # platform/ptmlab/settings.py -> parents[2] is the repository root that holds conf/ and web/.
    conf_dir: Path = Field(default=_REPO_ROOT / "conf", description="The Hydra config folder (the registry).")
    web_dir: Path = Field(default=_REPO_ROOT / "web", description="Dashboard templates and static files.")
    api_allowed_roots: str = Field(default="", description="Extra `:`-separated folders remote path values may name.")
    job_id: str | None = Field(default=None, description="Set by the worker for the job it runs.")
    # Fault injection for the recovery tests (tests/platform/test_kill_matrix.py): a worker stops
    # for good at the named point, for a test to kill it there. Unset, nothing changes.
    # `before-outcome`: a job has exited (its summary.json written) and its outcome is not recorded,
    # a window too narrow to hit from outside.
    fault_point: Literal["before-outcome"] | None = Field(
        default=None, description="Testing only: the worker pauses forever at this point (before-outcome).")

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, home: Path) -> Path:
        return home.expanduser().resolve()

    @property
    def allowed_root_paths(self) -> list[Path]:
        return [Path(p) for p in self.api_allowed_roots.split(os.pathsep) if p.strip()]

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'ptmlab.db'}"

    @property
    def resolved_tracking_uri(self) -> str:
        return (
            self.mlflow_tracking_uri
            or os.environ.get("MLFLOW_TRACKING_URI")
            or f"sqlite:///{self.home / 'mlflow.db'}"
        )

    @property
    def artifact_root(self) -> Path:
        return self.home / "artifacts"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()




def redact(text: str | None, settings: Settings | None = None) -> str | None:
    """`text` with URL passwords and the API token replaced by `***`: for logs, job errors and
    anything the dashboard or API shows."""
    if not text:
        return text
    text = redact_url_passwords(text)
    token = (settings or get_settings()).api_token
    if token:
        text = text.replace(token, "***")
    return text

"""Process settings, validated at start-up (pydantic-settings, `PTMLAB_` environment prefix)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ptmlab.contracts.secrets import redact_secrets

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
        default=900.0,
        gt=0,
        description="How long a job keeps retrying an unreachable MLflow server (metrics stay queued) before it fails.",
    )
    mlflow_ui_url: str | None = Field(default=None, description="Link target of the dashboard's MLflow buttons.")
    # platform/ptmlab/settings.py -> parents[2] is the repository root that holds conf/ and web/.
    conf_dir: Path = Field(default=_REPO_ROOT / "conf", description="The Hydra config folder (the registry).")
    web_dir: Path = Field(default=_REPO_ROOT / "web", description="Dashboard templates and static files.")
    api_allowed_roots: str = Field(default="", description="Extra `:`-separated folders remote path values may name.")
    # Who may talk to the API (ptmlab.api.request_guard): the names a browser reaches it by, the
    # reads that need the token, and how long `ptmlab serve` waits for a slow client.
    api_allowed_hosts: str = Field(
        default="",
        description="Extra `,`-separated host names the API answers to (a public name, a proxy's); "
        "loopback names and the bind host always are, any port.",
    )
    api_protect_reads: bool | None = Field(
        default=None,
        description="Reads that return logs, predictions, attempts or configs need the token too; "
        "default: on when a token is set and the API is bound beyond loopback.",
    )
    api_read_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="`ptmlab serve` drops a client that has not sent a whole request "
        "(headers and body) this many seconds after starting it.",
    )
    api_max_connections: int = Field(
        default=256, ge=1, description="`ptmlab serve` answers 503 beyond this many open connections."
    )
    job_id: str | None = Field(default=None, description="Set by the worker for the job it runs.")
    # Fault injection for the recovery tests (tests/platform/test_kill_matrix.py): a worker stops
    # for good at the named point, for a test to kill it there. Unset, nothing changes.
    # `before-outcome`: a job has exited (its summary.json written) and its outcome is not recorded,
    # a window too narrow to hit from outside.
    fault_point: Literal["before-outcome"] | None = Field(
        default=None, description="Testing only: the worker pauses forever at this point (before-outcome)."
    )

    @field_validator("api_token")
    @classmethod
    def _token_has_a_character(cls, token: str | None) -> str | None:
        if not token:
            return None  # empty: no token, as when unset
        if not token.strip():
            # No request could ever match it, yet it would count as "set" (and allow binding 0.0.0.0).
            raise ValueError("a token of only spaces: give one with a non-space character, or leave it unset")
        return token

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, home: Path) -> Path:
        return home.expanduser().resolve()

    @property
    def allowed_root_paths(self) -> list[Path]:
        return [Path(p) for p in self.api_allowed_roots.split(os.pathsep) if p.strip()]

    @property
    def allowed_host_names(self) -> list[str]:
        return [h.strip().lower().strip("[]") for h in self.api_allowed_hosts.split(",") if h.strip()]

    @property
    def reads_need_token(self) -> bool:
        """Whether the reads of logs, predictions, attempts and configs need the token."""
        if not self.api_token:
            return False
        return self.api_protect_reads if self.api_protect_reads is not None else not is_loopback(self.bind_host)

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'ptmlab.db'}"

    @property
    def resolved_tracking_uri(self) -> str:
        return (
            self.mlflow_tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{self.home / 'mlflow.db'}"
        )

    @property
    def artifact_root(self) -> Path:
        return self.home / "artifacts"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def describe_settings_error(exc: ValidationError) -> str:
    """One line naming each bad environment variable (PTMLAB_API_TOKEN: ...), for a start-up error."""
    parts = []
    for err in exc.errors():
        name = "PTMLAB_" + "_".join(str(x) for x in err.get("loc", ())).upper()
        parts.append(f"{name}: {err.get('msg', 'invalid').removeprefix('Value error, ')}")
    return "; ".join(parts)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and `localhost`; 0.0.0.0 / :: (every interface) and names are not."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def redact(text: str | None, settings: Settings | None = None) -> str | None:
    """`text` with its secrets (ptmlab.contracts.secrets: URL passwords, `password=`/`token=`/
    `secret=` values, DSNs) and the API token replaced by `***`: for logs, job errors and
    overrides, configs and anything the dashboard, the API or the CLI shows."""
    if not text:
        return text
    return redact_secrets(text, secret_literals(settings))


def secret_literals(settings: Settings | None = None) -> tuple[str, ...]:
    """Secrets known by value, for ptmlab.contracts.secrets: the API token."""
    token = (settings or get_settings()).api_token
    return (token,) if token and token.strip() else ()

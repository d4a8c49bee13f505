"""The one error hierarchy of ptmlab.

Every error a user can cause carries a stable `code`; the API maps codes to HTTP statuses in one
place (`ptmlab.api.errors.HTTP_STATUS_BY_CODE`) and the CLI prints `error[<code>]: <message>` and
exits non-zero. Messages are one line and name the offending key, path, row or value.
Part of `ptmlab.contracts`, the torch-free leaf both halves import: it imports nothing else of ptmlab.
"""

from __future__ import annotations


class PtmlabError(Exception):
    code = "ptmlab_error"

    def __init__(self, message: str):
        # One line: callers print it as is, so collapse accidental newlines.
        super().__init__(" ".join(str(message).split()))

    @property
    def message(self) -> str:
        return str(self)


class ConfigError(PtmlabError):
    """Unknown config group/option/key, an invalid value or an impossible combination."""

    code = "config_error"


class DataError(PtmlabError):
    """Missing data path, malformed row, empty split, a corpus too small for one block."""

    code = "data_error"


class BackboneError(PtmlabError):
    """A backbone reference (job:, mlflow:, HF name/path) that does not resolve or does not fit."""

    code = "backbone_error"


class UntrustedCodeError(BackboneError):
    """A file read from disk (an export, a task model's manifest, a stored config) that names code
    ptmlab does not ship for that slot, or a pickle where only safetensors are read."""

    code = "untrusted_code"


class NotFoundError(PtmlabError):
    code = "not_found"


class ConflictError(PtmlabError):
    """A state transition that is not allowed (cancel a finished job, retry a running one)."""

    code = "conflict"


class ForbiddenOverrideError(ConfigError):
    """An override a remote caller may not set (`_target_`, `hydra.*`, paths outside roots)."""

    code = "forbidden_override"


class AuthError(PtmlabError):
    code = "unauthorized"


class JobFailedError(PtmlabError):
    code = "job_failed"


class PayloadTooLargeError(PtmlabError):
    """A request body over the API's size limit."""

    code = "payload_too_large"


class LimitExceededError(PtmlabError):
    """A request over a stated bound: sweep size, override count, validation time budget."""

    code = "limit_exceeded"


__all__ = [
    "PtmlabError",
    "ConfigError",
    "DataError",
    "BackboneError",
    "UntrustedCodeError",
    "NotFoundError",
    "ConflictError",
    "ForbiddenOverrideError",
    "AuthError",
    "JobFailedError",
    "PayloadTooLargeError",
    "LimitExceededError",
]

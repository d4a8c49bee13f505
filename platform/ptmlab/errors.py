"""The one error hierarchy of ptmlab.

Every error a user can cause carries a stable `code`; the API maps codes to HTTP statuses in one
place (`HTTP_STATUS_BY_CODE`) and the CLI prints `error[<code>]: <message>` and exits non-zero.
Messages are one line and name the offending key, path, row or value.
This module is a leaf (no imports from the rest of ptmlab or from torch) so that both halves,
lightning_modules and ptmlab, can raise the same errors.
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


HTTP_STATUS_BY_CODE: dict[str, int] = {
    ConfigError.code: 422,
    ForbiddenOverrideError.code: 422,
    DataError.code: 422,
    BackboneError.code: 422,
    NotFoundError.code: 404,
    ConflictError.code: 409,
    AuthError.code: 401,
    JobFailedError.code: 409,
    PayloadTooLargeError.code: 413,
    LimitExceededError.code: 422,
    PtmlabError.code: 400,
}

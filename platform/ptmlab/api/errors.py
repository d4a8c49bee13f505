"""The one place where errors become HTTP responses: `PtmlabError.code` -> status through
`HTTP_STATUS_BY_CODE` below, body `{"error": {"code", "message"}}`."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ptmlab.contracts.errors import (
    AuthError,
    BackboneError,
    ConfigError,
    ConflictError,
    DataError,
    ForbiddenOverrideError,
    JobFailedError,
    LimitExceededError,
    NotFoundError,
    PayloadTooLargeError,
    PtmlabError,
)
from ptmlab.disk import describe_disk_full, disk_full_error

log = logging.getLogger("ptmlab.api")

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
    # Refusals and failures that are no PtmlabError: ptmlab.api.request_guard's and the handlers below.
    "cross_site_request": 403,
    "request_timeout": 408,
    "unsupported_media_type": 415,
    "host_not_allowed": 421,
    "internal_error": 500,
    "disk_full": 507,
}
# PostgreSQL's SQLSTATE for disk_full; SQLite's SQLITE_FULL (result code 13) reads "database or disk is full".
PG_DISK_FULL = "53100"
SQLITE_FULL = 13


def error_response(code: str, message: str, status: int | None = None, headers: dict | None = None) -> JSONResponse:
    status = status or HTTP_STATUS_BY_CODE.get(code, 400)
    return JSONResponse(
        {"error": {"code": code, "message": " ".join(str(message).split())}}, status_code=status, headers=headers
    )


def disk_full_reason(exc: BaseException | None) -> str | None:
    """What ran out of space, when `exc` (or an error in its chain) is a full disk: an OSError
    (ptmlab.disk's errnos), SQLite's "database or disk is full", PostgreSQL's disk_full."""
    if (os_error := disk_full_error(exc)) is not None:
        return describe_disk_full(os_error.filename or ".", os_error)
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        orig = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error in .orig
        if (
            getattr(orig, "sqlstate", None) == PG_DISK_FULL
            or getattr(orig, "sqlite_errorcode", None) == SQLITE_FULL
            or any(s in str(orig) for s in ("database or disk is full", "No space left on device"))
        ):
            return f"the database is out of space: {str(orig).splitlines()[0][:200]}"
        exc = exc.__cause__ or exc.__context__
    return None


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def wants_html(request: Request) -> bool:
    """A browser navigating to a page (not the API, whose clients always get JSON)."""
    return (
        request.method == "GET"
        and not request.url.path.startswith("/api/")
        and "text/html" in request.headers.get("accept", "")
    )


def install_error_handlers(app: FastAPI) -> None:
    """Errors as JSON; a browser's 404 for an unknown page as the dashboard's HTML page when the app
    sets `app.state.html_not_found(request, message)` (the dashboard does)."""

    @app.exception_handler(PtmlabError)
    async def _ptmlab_error(_request: Request, exc: PtmlabError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, AuthError) else None
        return error_response(exc.code, exc.message, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response("invalid_request", _validation_message(exc), status=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        html_page = getattr(request.app.state, "html_not_found", None)
        if exc.status_code == 404 and html_page is not None and wants_html(request):
            return html_page(request, f"no page at {request.url.path}")
        code = {
            404: "not_found",
            405: "method_not_allowed",
            408: "request_timeout",
            413: "payload_too_large",
            415: "unsupported_media_type",
        }.get(exc.status_code, "http_error")
        return error_response(code, str(exc.detail), status=exc.status_code, headers=getattr(exc, "headers", None))

    import sqlalchemy.exc

    @app.exception_handler(OSError)
    @app.exception_handler(sqlalchemy.exc.OperationalError)
    async def _disk_full(_request: Request, exc: Exception) -> JSONResponse:
        reason = disk_full_reason(exc)
        if reason is None:
            raise exc  # not a full disk: the catch-all below answers it, and the server logs it
        log.warning("507: %s", reason)
        return error_response("disk_full", f"out of disk space: {reason}")

    @app.exception_handler(Exception)
    async def _internal_error(_request: Request, exc: Exception) -> JSONResponse:
        # Starlette calls this last and then re-raises, so the traceback goes to the server's log,
        # never into the body.
        reason = disk_full_reason(exc)
        if reason is not None:
            return error_response("disk_full", f"out of disk space: {reason}")
        return error_response(
            "internal_error", f"internal error ({type(exc).__name__}); the server's log has the details"
        )

    @app.exception_handler(sqlalchemy.exc.DataError)
    async def _bad_value(_request: Request, exc: sqlalchemy.exc.DataError) -> JSONResponse:
        # A value the database cannot store or compare (out of range, NUL byte): the caller's input.
        return error_response("invalid_request", f"invalid value: {str(exc.orig).splitlines()[0]}", status=422)

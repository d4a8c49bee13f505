"""The one place where errors become HTTP responses: `PtmlabError.code` -> status through
`HTTP_STATUS_BY_CODE` below, body `{"error": {"code", "message"}}`."""

from __future__ import annotations

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


def error_response(code: str, message: str, status: int | None = None, headers: dict | None = None) -> JSONResponse:
    status = status or HTTP_STATUS_BY_CODE.get(code, 400)
    return JSONResponse({"error": {"code": code, "message": " ".join(str(message).split())}},
                        status_code=status, headers=headers)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def wants_html(request: Request) -> bool:
    """A browser navigating to a page (not the API, whose clients always get JSON)."""
    return request.method == "GET" and not request.url.path.startswith("/api/") \
        and "text/html" in request.headers.get("accept", "")


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
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(exc.status_code, "http_error")
        return error_response(code, str(exc.detail), status=exc.status_code, headers=getattr(exc, "headers", None))

    import sqlalchemy.exc

    @app.exception_handler(sqlalchemy.exc.DataError)
    async def _bad_value(_request: Request, exc: sqlalchemy.exc.DataError) -> JSONResponse:
        # A value the database cannot store or compare (out of range, NUL byte): the caller's input.
        return error_response("invalid_request", f"invalid value: {str(exc.orig).splitlines()[0]}", status=422)

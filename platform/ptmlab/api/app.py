"""The REST API (FastAPI, `/api/v1`): `create_app(settings)`; `ptmlab serve` runs it with uvicorn on
127.0.0.1 by default. Torch-free: submissions are validated with Hydra's compose API only.

The database schema is migrated at start-up; all state lives in the database, so any number of
API processes can serve the same queue and a restarted API loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi_offline import FastAPIOffline
from sqlalchemy.orm import sessionmaker
from starlette.middleware.gzip import GZipMiddleware

from ptmlab.api.errors import error_response, install_error_handlers
from ptmlab.api.request_guard import RequestGuard
from ptmlab.api.validation import MAX_OVERRIDES, MAX_SWEEP_JOBS, VALIDATION_BUDGET_S, allowed_roots
from ptmlab.settings import Settings, get_settings

MAX_BODY_BYTES = 256 * 1024


class BodySizeLimit:
    """Refuse request bodies over `max_bytes` with 413, by Content-Length or while streaming."""

    def __init__(self, app, max_bytes: int = MAX_BODY_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_large = error_response("payload_too_large", f"request body over {self.max_bytes} bytes")
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return await too_large(scope, receive, send)
        received = 0
        started = False

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _TooLarge(413, f"request body over {self.max_bytes} bytes")
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await too_large(scope, receive, send)


class _TooLarge(HTTPException):
    """An HTTPException so that FastAPI's body parsing re-raises it instead of answering 400."""


def create_app(
    settings: Settings | None = None, *, extra_roots: Iterable[str | Path] = (), max_body_bytes: int = MAX_BODY_BYTES
) -> FastAPI:
    from ptmlab.api.routes import catalogue, health, jobs, pipelines, results, studies, sweeps, workers
    from ptmlab.db import get_engine

    settings = settings or get_settings()
    url = settings.resolved_database_url

    # Swagger UI from the assets fastapi-offline ships (FastAPI's default pages load them from a CDN,
    # which a cluster node often cannot reach: /docs was a blank page); /redoc: ptmlab.api.routes.pages.
    app = FastAPIOffline(
        title="ptmlab",
        version="1",
        favicon_url="/favicon.ico",
        redoc_url=None,
        description="Job queue, sweeps, pipelines, workers, config catalogue and results of ptmlab. "
        "Mutating routes need `Authorization: Bearer <PTMLAB_API_TOKEN>` when a token is set (checked "
        "before the body is read), and so do the reads of logs, attempts, predictions, attack records "
        "and configs when the API is bound beyond loopback (PTMLAB_API_PROTECT_READS). The API answers "
        "only its own names (`Host`: loopback, the bind host, PTMLAB_API_ALLOWED_HOSTS; else 421); "
        "a write takes a JSON body or none (else 415) and is refused from another site's page (403).\n\n"
        f"Limits per request: a body of at most {max_body_bytes:,} bytes (413 above); at most "
        f"{MAX_OVERRIDES} overrides of at most 2,000 characters each; a sweep or pipeline expands "
        f"to at most {MAX_SWEEP_JOBS:,} jobs (counted from the parsed sweeps before anything is "
        f"listed); composing and checking one request's configs gets at most {VALIDATION_BUDGET_S:g} s. "
        "Over a limit: 422 `limit_exceeded` naming it. No override may set, append, force-set, "
        "replace or delete a key that selects code (`_target_`, `stage.entry`, `_partial_`, ...): "
        "422 `forbidden_override`.",
    )
    app.state.settings = settings
    app.state.database_url = url
    app.state.allowed_roots = allowed_roots(settings, extra_roots)
    # Migrations are applied here, at start-up (get_engine migrates once per process and URL).
    settings.home.mkdir(parents=True, exist_ok=True)
    app.state.sessionmaker = sessionmaker(bind=get_engine(url), expire_on_commit=False)
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)
    # Views, pages and scripts compressed for the browser (a 10,000-row runs view is ~4 MB of JSON);
    # Plotly's bundle is served compressed once (pages.py), which this middleware leaves as it is.
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=5)
    # Added last, so outermost: Host, origin and token are checked before a body is read.
    app.add_middleware(RequestGuard, settings=settings)
    for module in (jobs, sweeps, pipelines, studies, workers, catalogue, results):
        app.include_router(module.router, prefix="/api/v1")
    app.include_router(health.router)
    # The dashboard: its JSON views under /api/v1/views, its pages and static files at /.
    from ptmlab.api.routes import pages, views

    app.include_router(views.router, prefix="/api/v1")
    app.include_router(pages.router)
    app.state.html_not_found = pages.not_found_page
    return app

"""Dependencies of the routes: the database session, settings, allowed roots, bearer-token auth, and
the paging parameters of a list."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from ptmlab.api.schemas import INT4_MAX
from ptmlab.errors import AuthError
from ptmlab.settings import Settings


def get_settings_dep(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    session = request.app.state.sessionmaker()
    try:
        yield session
    finally:
        session.close()


def get_roots(request: Request) -> list[Path]:
    return request.app.state.allowed_roots


_bearer = HTTPBearer(auto_error=False, description="PTMLAB_API_TOKEN, required for mutating routes when set")


def bearer_problem(authorization: str | None, expected: str) -> str | None:
    """Why `authorization` (an `Authorization` header's value) does not carry `expected`, or None.
    Compared in constant time, over digests so that not even the token's length shows."""
    scheme, _, given = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return "this route needs `Authorization: Bearer <PTMLAB_API_TOKEN>`"
    if not secrets.compare_digest(
        hashlib.sha256(given.strip().encode()).digest(), hashlib.sha256(expected.strip().encode()).digest()
    ):
        return "the bearer token does not match PTMLAB_API_TOKEN"
    return None


def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """Mutating routes: when a token is configured, `Authorization: Bearer <token>` must match it.
    ptmlab.api.request_guard checks it before the body is read; this keeps it in the OpenAPI schema
    and guards the route should it ever be mounted without the guard."""
    expected = request.app.state.settings.api_token
    if not expected:
        return
    header = f"{credentials.scheme} {credentials.credentials}" if credentials is not None else None
    if (problem := bearer_problem(header, expected)) is not None:
        raise AuthError(problem)


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
RootsDep = Annotated[list[Path], Depends(get_roots)]
Authorized = Depends(require_token)
# A list route's paging: `?limit=&offset=` (offset bounded so the database never sees an overflow).
PageLimit = Annotated[int, Query(ge=1, le=1000)]
PageOffset = Annotated[int, Query(ge=0, le=INT4_MAX)]
GroupId = Annotated[str, PathParam(max_length=32, pattern=r"^[A-Za-z0-9_\-]+$")]  # a sweep, pipeline or study

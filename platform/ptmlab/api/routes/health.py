"""/healthz: the API is up and its database answers."""

from __future__ import annotations

import sqlalchemy as sa
from fastapi import APIRouter, Request

from ptmlab.api.errors import error_response
from ptmlab.api.schemas import ErrorOut, HealthOut
from ptmlab.settings import redact

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthOut, responses={503: {"model": ErrorOut}})
def healthz(request: Request):
    try:
        with request.app.state.sessionmaker() as session:
            session.execute(sa.text("SELECT 1"))
            backend = session.get_bind().dialect.name
    except sa.exc.SQLAlchemyError as exc:
        return error_response("database_unreachable", redact(str(exc).splitlines()[0]), status=503)
    return {"status": "ok", "database": backend}

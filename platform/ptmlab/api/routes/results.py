"""/api/v1/results: finished jobs' summaries (filter by kind, sweep, job, tags), the GLUE leaderboard
(the dashboard's leaderboard view under a second name) and the SuperGLUE one (its tasks and average)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from ptmlab.api.deps import SessionDep
from ptmlab.api.schemas import INT4_MAX, ErrorOut, ModeFilter, ResultPage
from ptmlab.errors import ConfigError
from ptmlab.leaderboard.grouping import parse_adaptation_filter
from ptmlab.results import parse_tag_filter, query_results
from ptmlab.views.leaderboard import leaderboard_view

router = APIRouter(prefix="/results", tags=["results"])
Name = Annotated[str | None, Query(max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")]


def _tags(tag: list[str] | None) -> dict[str, str]:
    out = {}
    for t in tag or []:
        if "=" not in t:
            raise ConfigError(f"tag {t!r}: expected key=value")
        key, value = t.split("=", 1)
        out[key] = value
    return out


@router.get("", response_model=ResultPage, responses={422: {"model": ErrorOut}})
def list_results(session: SessionDep, kind: Name = None, sweep_id: Name = None,
                 job_id: Annotated[int | None, Query(ge=1, le=INT4_MAX)] = None,
                 tag: Annotated[list[str] | None, Query(max_length=20, description="key=value, repeatable")] = None,
                 limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                 offset: Annotated[int, Query(ge=0, le=INT4_MAX)] = 0) -> dict:
    for t in tag or []:
        if "\x00" in t or len(t) > 600:
            raise ConfigError(f"tag {t[:40]!r}...: invalid")
    rows, total = query_results(session, kind=kind, sweep_id=sweep_id, job_id=job_id, tags=_tags(tag),
                                limit=limit, offset=offset)
    return {"total": total, "limit": limit, "offset": offset, "results": [r.to_dict() for r in rows]}


@router.get("/glue", responses={422: {"model": ErrorOut}},
            summary="GLUE leaderboard (the dashboard's view, /views/leaderboard): finetune and multi-task results "
                    "grouped by configuration, mean ± std over seeds on GLUE's 0-100 scale, the result ids behind "
                    "each cell")
def glue_leaderboard(session: SessionDep, sweep_id: Name = None,
                     tag: Annotated[str | None, Query(max_length=600, description="key=value[,key=value]")] = None,
                     group_by: Annotated[str, Query(max_length=200, pattern=r"^[A-Za-z0-9_,]+$")] = "model,objective,adaptation",
                     adaptation: ModeFilter = None,
                     ) -> JSONResponse:
    return _board(session, sweep_id, tag, group_by, adaptation, "glue")


@router.get("/superglue", responses={422: {"model": ErrorOut}},
            summary="SuperGLUE leaderboard: the GLUE leaderboard's view of the SuperGLUE tasks, each row's average "
                    "theirs (CB: mean of accuracy and macro-F1; MultiRC: of F1a and exact match)")
def superglue_leaderboard(session: SessionDep, sweep_id: Name = None,
                          tag: Annotated[str | None, Query(max_length=600, description="key=value[,key=value]")] = None,
                          group_by: Annotated[str, Query(max_length=200, pattern=r"^[A-Za-z0-9_,]+$")] = "model,objective,adaptation",
                          adaptation: ModeFilter = None,
                          ) -> JSONResponse:
    return _board(session, sweep_id, tag, group_by, adaptation, "superglue")


def _board(session, sweep_id: str | None, tag: str | None, group_by: str, adaptation: str | None,
           benchmark: str) -> JSONResponse:
    """One benchmark's leaderboard view, as the dashboard's /views/leaderboard serves it."""
    keys = [k for k in group_by.split(",") if k]
    if not keys:
        raise ConfigError("group_by: name at least one summary key")
    view = leaderboard_view(session, sweep_id=sweep_id, tags=parse_tag_filter(tag), group_by=keys,
                            adaptations=parse_adaptation_filter(adaptation), benchmark=benchmark)
    return JSONResponse(view)  # plain JSON already (ptmlab.views makes numbers finite)

"""/api/v1/results: finished jobs' summaries (filter by kind, sweep, job, tags) and the GLUE leaderboard."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from ptmlab.api.deps import SessionDep
from ptmlab.api.schemas import INT4_MAX, ErrorOut, ModeFilter, ResultPage
from ptmlab.errors import ConfigError
from ptmlab.results import query_results

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


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


@router.get("/glue", responses={422: {"model": ErrorOut}},
            summary="GLUE leaderboard: finetune results grouped by configuration, mean ± std over seeds")
def glue_leaderboard(request: Request, sweep_id: Name = None,
                     group_by: Annotated[str, Query(max_length=200, pattern=r"^[A-Za-z0-9_,]+$")] = "model,objective,adaptation",
                     adaptation: ModeFilter = None,
                     ) -> dict:
    from ptmlab.leaderboard import LEADERBOARD_KINDS, build_leaderboard, load_summaries, parse_adaptation_filter

    modes = parse_adaptation_filter(adaptation)
    summaries = load_summaries(request.app.state.database_url, kind=LEADERBOARD_KINDS, sweep_id=sweep_id)
    board = build_leaderboard(summaries, group_by=[g for g in group_by.split(",") if g], adaptations=modes)
    return {"group_by": list(board.group_by), "tasks": board.tasks,
            "rows": [{**_plain(r), "flags": r.flags, "footprint": r.footprint.as_dict()} for r in board.rows]}

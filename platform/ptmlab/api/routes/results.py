"""/api/v1/results: finished jobs' summaries (filter by kind, sweep, job, tags) and each benchmark's
leaderboard, `/results/<benchmark>` (the dashboard's leaderboard view under a second name; the
benchmarks are ptmlab.contracts.benchmarks' table)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from ptmlab.api.deps import SessionDep
from ptmlab.api.routes.views import GroupBy, Pool
from ptmlab.api.schemas import INT4_MAX, ErrorOut, ModeFilter, ResultPage
from ptmlab.errors import ConfigError
from ptmlab.leaderboard.grouping import parse_adaptation_filter
from ptmlab.results import parse_tag_filter, query_results
from ptmlab.views.leaderboard import leaderboard_view

router = APIRouter(prefix="/results", tags=["results"])
Name = Annotated[str | None, Query(max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")]


@router.get("", response_model=ResultPage, responses={422: {"model": ErrorOut}})
def list_results(
    session: SessionDep,
    kind: Name = None,
    sweep_id: Name = None,
    job_id: Annotated[int | None, Query(ge=1, le=INT4_MAX)] = None,
    tag: Annotated[list[str] | None, Query(max_length=20, description="key=value[,key=value], repeatable")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0, le=INT4_MAX)] = 0,
) -> dict:
    for t in tag or []:
        if "\x00" in t or len(t) > 600:
            raise ConfigError(f"tag {t[:40]!r}...: invalid")
    # the views' one tag syntax (key=value[,key=value]); each repeat adds its pairs
    tags = parse_tag_filter(",".join(tag or []))
    rows, total = query_results(
        session, kind=kind, sweep_id=sweep_id, job_id=job_id, tags=tags, limit=limit, offset=offset
    )
    return {"total": total, "limit": limit, "offset": offset, "results": [r.to_dict() for r in rows]}


@router.get(
    "/{benchmark}",
    responses={422: {"model": ErrorOut}},
    summary="A benchmark's leaderboard (glue | superglue | tasks | generation; the dashboard's view, "
    "/views/leaderboard?benchmark=): finetune and multi-task results grouped by configuration, "
    "mean ± std over seeds on a 0-100 scale, the jobs behind each cell; rows by summary or config keys "
    "(group_by=model,stage.lr), one configuration per row unless pool=true; GLUE's and "
    "SuperGLUE's with their average, tasks (SQuAD EM/F1, entity F1, choice accuracy) and "
    "generation (BLEU/chrF, ROUGE) scored by each task's main metric",
)
def benchmark_leaderboard(
    session: SessionDep,
    benchmark: Annotated[str, Path(max_length=40, pattern=r"^[A-Za-z0-9_]+$")],
    sweep_id: Name = None,
    tag: Annotated[str | None, Query(max_length=600, description="key=value[,key=value]")] = None,
    group_by: GroupBy = "model,objective,adaptation",
    adaptation: ModeFilter = None,
    pool: Pool = False,
) -> JSONResponse:
    return _board(session, sweep_id, tag, group_by, adaptation, benchmark, pool)


def _board(
    session,
    sweep_id: str | None,
    tag: str | None,
    group_by: str,
    adaptation: str | None,
    benchmark: str,
    pool: bool = False,
) -> JSONResponse:
    """One benchmark's leaderboard view, as the dashboard's /views/leaderboard serves it."""
    keys = [k for k in group_by.split(",") if k]
    if not keys:
        raise ConfigError("group_by: name at least one summary key")
    view = leaderboard_view(
        session,
        sweep_id=sweep_id,
        tags=parse_tag_filter(tag),
        group_by=keys,
        adaptations=parse_adaptation_filter(adaptation),
        benchmark=benchmark,
        pool=pool,
    )
    return JSONResponse(view)  # plain JSON already (ptmlab.views makes numbers finite)

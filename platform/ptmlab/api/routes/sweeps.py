"""/api/v1/sweeps: a multirun expanded to the cross product (Hydra's sweep grammar), queued as one
sweep in one transaction; `dry_run` returns the count and each job's overrides only."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ptmlab import queue
from ptmlab.api.deps import Authorized, GroupId, RootsDep, SessionDep
from ptmlab.api.routes.group_lists import add_group_list_route
from ptmlab.api.schemas import ErrorOut, SweepOut, SweepSubmit
from ptmlab.api.validation import check_overrides_allowed, expand_sweep, validate_sweep_jobs

router = APIRouter(prefix="/sweeps", tags=["sweeps"])
ERRORS: dict[int | str, dict[str, Any]] = {401: {"model": ErrorOut}, 404: {"model": ErrorOut}, 422: {"model": ErrorOut}}


def plan_sweep(overrides: list[str], roots, jobs: list[list[str]] | None = None) -> list[list[str]]:
    """Expand (or take the expanded `jobs`) and validate a sweep: every combination must compose."""
    if jobs is not None:
        validate_sweep_jobs(jobs, roots)
        return [list(j) for j in jobs]
    check_overrides_allowed(overrides, roots)
    combos = expand_sweep(overrides)
    validate_sweep_jobs(combos, roots)
    return combos


@router.post(
    "",
    response_model=SweepOut,
    responses=ERRORS,
    dependencies=[Authorized],
    summary="Expand a multirun to the cross product and queue it (or only count it: dry_run)",
)
def submit_sweep(body: SweepSubmit, session: SessionDep, roots: RootsDep):
    combos = plan_sweep(body.overrides, roots, body.jobs)
    if body.dry_run:
        return {"id": None, "name": body.name, "dry_run": True, "count": len(combos), "jobs": combos}
    options = body.model_dump(exclude={"overrides", "jobs", "name", "dry_run"})
    source = {"overrides": body.overrides} if body.jobs is None else {"jobs": combos}
    sweep, jobs = queue.submit_sweep(
        session,
        [{**options, "overrides": c, "submitted_remotely": True} for c in combos],
        name=body.name,
        spec={**source, **options},
    )

    return JSONResponse(
        status_code=201,
        content={
            "id": sweep.id,
            "name": sweep.name,
            "dry_run": False,
            "count": len(jobs),
            "jobs": combos,
            "job_ids": [j.id for j in jobs],
            "spec": sweep.to_dict()["spec"],
            "created_at": sweep.to_dict()["created_at"],
        },
    )


add_group_list_route(router, "sweep", ERRORS)


@router.get("/{sweep_id}", response_model=SweepOut, responses=ERRORS)
def get_sweep(sweep_id: GroupId, session: SessionDep):
    sweep = queue.get_sweep(session, sweep_id)
    jobs, _ = queue.list_jobs(session, sweep_id=sweep_id, limit=1000)
    jobs = sorted(jobs, key=lambda j: j.id)
    d = sweep.to_dict()
    return {
        "id": d["id"],
        "name": d["name"],
        "dry_run": False,
        "count": d["job_count"],
        "jobs": [[f"stage={j.stage}", f"seed={j.seed}", *j.to_dict()["overrides"]] for j in jobs],
        "job_ids": [j.id for j in jobs],
        "spec": d["spec"],
        "created_at": d["created_at"],
    }

"""/api/v1/pipelines: queue a conf/pipeline/<name>.yaml graph (or an inline one)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ptmlab import queue
from ptmlab.api.deps import Authorized, GroupId, RootsDep, SessionDep
from ptmlab.api.routes.group_lists import add_group_list_route
from ptmlab.api.schemas import ErrorOut, PipelineOut, PipelineSubmit
from ptmlab.api.validation import (
    VALIDATION_BUDGET_S,
    ValidationBudget,
    check_override_allowed,
    check_overrides_allowed,
    validate_job,
)
from ptmlab.code_keys import code_keys
from ptmlab.contracts.identity import overrides_but_seed
from ptmlab.contracts.progress import split_for_listing
from ptmlab.errors import ConfigError, ForbiddenOverrideError

router = APIRouter(prefix="/pipelines", tags=["pipelines"])
ERRORS = {401: {"model": ErrorOut}, 404: {"model": ErrorOut}, 422: {"model": ErrorOut}}


def _refuse_code_keys(spec, where: str = "spec") -> None:
    """A code-selecting key anywhere in an inline spec (overrides are checked once expanded)."""
    names = code_keys().names
    if isinstance(spec, dict):
        for key, value in spec.items():
            if str(key) in names or any(n.startswith("_") and n in str(key) for n in names):
                raise ForbiddenOverrideError(
                    f"pipeline {where}.{key}: `{key}` selects code and may not be set remotely"
                )
            _refuse_code_keys(value, f"{where}.{key}")
    elif isinstance(spec, list):
        for i, value in enumerate(spec):
            _refuse_code_keys(value, f"{where}[{i}]")
    elif isinstance(spec, str) and "_target_" in spec:
        raise ForbiddenOverrideError(f"pipeline {where}: `_target_` may not be set remotely")


def _job_out(pj, job_id=None) -> dict:
    return {
        "name": pj.name,
        "stage": pj.stage,
        "overrides": list(pj.overrides),
        "depends_on": list(pj.depends_on),
        "job_id": job_id,
    }


def _plain_seed(override: str) -> bool:
    """`seed=<n>` with n a valid seed: what composing the job again would check of it."""
    value = override.partition("=")[2]
    return value.isdigit() and int(value) <= 4294967295


@router.post(
    "",
    response_model=PipelineOut,
    responses=ERRORS,
    dependencies=[Authorized],
    summary="Expand, validate and queue a pipeline (dry_run: only expand and validate)",
)
def submit_pipeline(body: PipelineSubmit, session: SessionDep, roots: RootsDep):
    if (body.name is None) == (body.spec is None):
        raise ConfigError("give exactly one of `name` (a conf/pipeline file) or `spec` (an inline pipeline)")
    source = body.spec if body.spec is not None else body.name
    if body.spec is not None:
        _refuse_code_keys(body.spec)
    check_overrides_allowed(body.overrides, roots)
    expanded = queue.expand_pipeline(source, body.overrides)
    budget = ValidationBudget(VALIDATION_BUDGET_S, f"pipeline {source if isinstance(source, str) else 'spec'}")
    composed: set[tuple] = set()  # jobs that differ only in their seed compose alike: once each
    for done, pj in enumerate(expanded):
        budget.check(done, len(expanded))
        for key, value in pj.options.items():
            if isinstance(value, str):
                check_override_allowed(f"{key}={value}", roots)
        seed = pj.options.get("seed")
        seeds = [o for o in pj.overrides if o.startswith("seed=")]
        same_but_seed = (pj.stage, seed is None, overrides_but_seed(pj.overrides))
        if same_but_seed in composed and all(_plain_seed(o) for o in seeds):
            continue
        composed.add(same_but_seed)
        try:
            validate_job(pj.overrides, roots, stage=pj.stage, seed=int(seed) if seed is not None else None)
        except ValueError:
            raise ConfigError(f"pipeline job {pj.name}: seed={seed!r} is not an integer") from None
        except ConfigError as exc:
            raise type(exc)(f"pipeline job {pj.name}: {exc}") from None
    name = str((body.spec or {}).get("name") or body.name or "pipeline")
    if body.dry_run:
        return {
            "id": None,
            "name": name,
            "dry_run": True,
            "count": len(expanded),
            "jobs": [_job_out(pj) for pj in expanded],
        }
    pipeline, jobs = queue.submit_pipeline(
        session, source, overrides=body.overrides, tags=body.tags, submitted_remotely=True
    )
    return JSONResponse(
        status_code=201,
        content={
            "id": pipeline.id,
            "name": pipeline.name,
            "dry_run": False,
            "count": len(jobs),
            "jobs": [_job_out(pj, j.id) for pj, j in zip(expanded, jobs, strict=True)],
        },
    )


add_group_list_route(router, "pipeline", ERRORS)


@router.get("/{pipeline_id}", response_model=PipelineOut, responses=ERRORS)
def get_pipeline(pipeline_id: GroupId, session: SessionDep):
    pipeline = queue.get_pipeline(session, pipeline_id)
    jobs, total = queue.list_jobs(session, pipeline_id=pipeline_id, limit=1000)
    by_id = {j.id: j for j in jobs}
    return {
        "id": pipeline.id,
        "name": pipeline.name,
        "dry_run": False,
        "count": total,
        "jobs": [
            {
                "name": j.name or str(j.id),
                "stage": j.stage,
                "overrides": j.to_dict()["overrides"],
                "depends_on": [by_id[p].name or str(p) if p in by_id else str(p) for p in j.parent_ids],
                "job_id": j.id,
                "status": j.status,
                "progress": split_for_listing(j.progress)[0],
            }
            for j in sorted(jobs, key=lambda j: j.id)
        ],
    }

"""/api/v1/pipelines: queue a conf/pipeline/<name>.yaml graph (or an inline one)."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from ptmlab import queue
from ptmlab.api.deps import Authorized, RootsDep, SessionDep
from ptmlab.api.schemas import ErrorOut, PipelineOut, PipelineSubmit
from ptmlab.api.validation import check_override_allowed, check_overrides_allowed, validate_job
from ptmlab.errors import ConfigError, ForbiddenOverrideError

router = APIRouter(prefix="/pipelines", tags=["pipelines"])
ERRORS = {401: {"model": ErrorOut}, 404: {"model": ErrorOut}, 422: {"model": ErrorOut}}


def _job_out(pj, job_id=None) -> dict:
    return {"name": pj.name, "stage": pj.stage, "overrides": list(pj.overrides),
            "depends_on": list(pj.depends_on), "job_id": job_id}


@router.post("", response_model=PipelineOut, responses=ERRORS, dependencies=[Authorized],
             summary="Expand, validate and queue a pipeline (dry_run: only expand and validate)")
def submit_pipeline(body: PipelineSubmit, session: SessionDep, roots: RootsDep):
    if (body.name is None) == (body.spec is None):
        raise ConfigError("give exactly one of `name` (a conf/pipeline file) or `spec` (an inline pipeline)")
    source = body.spec if body.spec is not None else body.name
    if body.spec is not None and "_target_" in json.dumps(body.spec):
        raise ForbiddenOverrideError("pipeline spec: `_target_` may not be set through the API")
    check_overrides_allowed(body.overrides, roots)
    expanded = queue.expand_pipeline(source, body.overrides)
    for pj in expanded:
        for key, value in pj.options.items():
            if isinstance(value, str):
                check_override_allowed(f"{key}={value}", roots)
        seed = pj.options.get("seed")
        try:
            validate_job(pj.overrides, roots, stage=pj.stage, seed=int(seed) if seed is not None else None)
        except ValueError:
            raise ConfigError(f"pipeline job {pj.name}: seed={seed!r} is not an integer") from None
        except ConfigError as exc:
            raise type(exc)(f"pipeline job {pj.name}: {exc}") from None
    name = str((body.spec or {}).get("name") or body.name or "pipeline")
    if body.dry_run:
        return {"id": None, "name": name, "dry_run": True, "count": len(expanded),
                "jobs": [_job_out(pj) for pj in expanded]}
    pipeline, jobs = queue.submit_pipeline(session, source, overrides=body.overrides, tags=body.tags)
    return JSONResponse(status_code=201, content={
        "id": pipeline.id, "name": pipeline.name, "dry_run": False, "count": len(jobs),
        "jobs": [_job_out(pj, j.id) for pj, j in zip(expanded, jobs, strict=True)]})


@router.get("/{pipeline_id}", response_model=PipelineOut, responses=ERRORS)
def get_pipeline(pipeline_id: Annotated[str, Path(max_length=32, pattern=r"^[A-Za-z0-9_\-]+$")],
                 session: SessionDep):
    pipeline = queue.get_pipeline(session, pipeline_id)
    jobs, total = queue.list_jobs(session, pipeline_id=pipeline_id, limit=1000)
    by_id = {j.id: j for j in jobs}
    return {"id": pipeline.id, "name": pipeline.name, "dry_run": False, "count": total,
            "jobs": [{"name": j.name or str(j.id), "stage": j.stage, "overrides": list(j.overrides),
                      "depends_on": [by_id[p].name or str(p) if p in by_id else str(p) for p in j.parent_ids],
                      "job_id": j.id} for j in sorted(jobs, key=lambda j: j.id)]}

"""/api/v1/jobs: submit (or preview the recipe it would train with), list, get, progress, cancel, retry, logs, attempts, an attack job's records, a
fine-tune job's prediction samples."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query

from ptmlab import queue
from ptmlab.api.deps import Authorized, PageLimit, PageOffset, RootsDep, SessionDep
from ptmlab.api.schemas import (
    INT4_MAX,
    AttackRecordsOut,
    AttemptOut,
    ErrorOut,
    JobLabels,
    JobOut,
    JobPage,
    JobSubmit,
    LogOut,
    PredictionSamplesOut,
    ProgressHistoryOut,
    RecipeOut,
)
from ptmlab.api.validation import compose_checked, validate_job
from ptmlab.contracts.progress import history_series, split_for_listing
from ptmlab.contracts.recipes import effective_recipe
from ptmlab.views.attack_records import attack_records_view
from ptmlab.views.prediction_samples import prediction_samples_view

router = APIRouter(prefix="/jobs", tags=["jobs"])
ERRORS = {401: {"model": ErrorOut}, 404: {"model": ErrorOut}, 409: {"model": ErrorOut}, 422: {"model": ErrorOut}}
JobIdPath = Annotated[int, Path(ge=1, le=INT4_MAX)]
Status = Literal["queued", "running", "succeeded", "failed", "cancelled", "pruned"]
Name = Annotated[str | None, Query(max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")]


@router.post(
    "",
    status_code=201,
    response_model=JobOut,
    responses=ERRORS,
    dependencies=[Authorized],
    summary="Validate (compose the config) and queue one job",
)
def submit_job(body: JobSubmit, session: SessionDep, roots: RootsDep) -> dict:
    validate_job(body.overrides, roots, stage=body.stage, seed=body.seed)
    job = queue.submit_job(session, **body.model_dump(), submitted_remotely=True)
    return job.to_dict()


@router.get("", response_model=JobPage, responses=ERRORS, summary="Jobs, newest first")
def list_jobs(
    session: SessionDep,
    status: Status | None = None,
    queue_name: Annotated[Name, Query(alias="queue")] = None,
    stage: Name = None,
    sweep_id: Name = None,
    pipeline_id: Name = None,
    limit: PageLimit = 50,
    offset: PageOffset = 0,
) -> dict:
    jobs, total = queue.list_jobs(
        session,
        status=status,
        queue=queue_name,
        stage=stage,
        sweep_id=sweep_id,
        pipeline_id=pipeline_id,
        limit=limit,
        offset=offset,
    )
    return {"total": total, "limit": limit, "offset": offset, "jobs": [j.to_dict() for j in jobs]}


@router.get("/{job_id}", response_model=JobOut, responses=ERRORS)
def get_job(job_id: JobIdPath, session: SessionDep) -> dict:
    return queue.get_job(session, job_id).to_dict()


@router.get(
    "/{job_id}/progress",
    response_model=ProgressHistoryOut,
    responses=ERRORS,
    summary="The latest progress and the metric history the job page draws (from the platform's store)",
)
def get_progress(job_id: JobIdPath, session: SessionDep) -> dict:
    job = queue.get_job(session, job_id)
    latest, history = split_for_listing(job.progress)
    return {
        "job_id": job.id,
        "status": job.status,
        "progress": latest,
        "history": history,
        "series": history_series(history),
    }


@router.post(
    "/recipe",
    response_model=RecipeOut,
    responses=ERRORS,
    dependencies=[Authorized],
    summary="The recipe a job would train with: each value and where it comes from (nothing is queued)",
)
def job_recipe(body: JobSubmit, roots: RootsDep) -> dict:
    seed = [f"seed={body.seed}"] if body.seed is not None else []
    cfg = compose_checked([*body.overrides, *seed], roots, stage=body.stage)
    return effective_recipe(cfg) or {"name": "none", "requested": "none", "values": {}}


@router.post(
    "/{job_id}/cancel",
    response_model=JobOut,
    responses=ERRORS,
    dependencies=[Authorized],
    summary="Cancel: a queued job at once, a running one is killed by its worker within seconds",
)
def cancel_job(job_id: JobIdPath, session: SessionDep) -> dict:
    return queue.cancel_job(session, job_id).to_dict()


@router.post(
    "/{job_id}/retry",
    response_model=JobOut,
    responses=ERRORS,
    dependencies=[Authorized],
    summary="Queue a failed or cancelled job again",
)
def retry_job(job_id: JobIdPath, session: SessionDep) -> dict:
    return queue.retry_job(session, job_id).to_dict()


@router.patch(
    "/{job_id}",
    response_model=JobOut,
    responses=ERRORS,
    dependencies=[Authorized],
    summary="Rename a job, set or remove tags (null removes), write its note; any state",
)
def label_job(job_id: JobIdPath, body: JobLabels, session: SessionDep) -> dict:
    given = body.model_fields_set
    return queue.label_job(
        session, job_id, tags=body.tags, **{k: getattr(body, k) for k in ("name", "note") if k in given}
    ).to_dict()


@router.get("/{job_id}/attempts", response_model=list[AttemptOut], responses=ERRORS)
def list_attempts(job_id: JobIdPath, session: SessionDep) -> list[dict]:
    queue.get_job(session, job_id)  # 404 for an unknown job, not an empty list
    return [a.to_dict() for a in queue.list_attempts(session, job_id)]


@router.get(
    "/{job_id}/logs",
    response_model=LogOut,
    responses=ERRORS,
    summary="An attempt's log (default: the latest) from byte `offset`, or its last `tail` lines",
    description="Secrets are masked (`***`: URL passwords, `password=`/`token=`/`secret=` values, DSNs, "
    "the API token), each line redacted whole. `offset` and `size` count bytes of the log "
    "file; pass the answer's `offset` back to read what follows. While the attempt runs, "
    "the line still being written is held back until it ends; an offset inside a line "
    "reads that line from there, with `***` where the offset falls inside a secret.",
)
def read_log(
    job_id: JobIdPath,
    session: SessionDep,
    offset: Annotated[int, Query(ge=0, le=2**53)] = 0,
    tail: Annotated[int | None, Query(ge=0, le=100_000)] = None,
    attempt: Annotated[int | None, Query(ge=1, le=INT4_MAX)] = None,
) -> dict:
    queue.get_job(session, job_id)
    chunk = queue.read_log(session, job_id, attempt=attempt, offset=offset, tail=tail)
    return {
        "job_id": job_id,
        "attempt": chunk.attempt,
        "text": chunk.text,
        "offset": chunk.offset,
        "size": chunk.size,
        "path": chunk.path,
    }


@router.get(
    "/{job_id}/attack-records",
    response_model=AttackRecordsOut,
    responses=ERRORS,
    summary="An attack job's per-example records of one status (its attack/records.jsonl), a page at a "
    "time, each text as words with the changed ones marked; the count of each status",
)
def attack_records(
    job_id: JobIdPath,
    session: SessionDep,
    status: Literal["succeeded", "failed", "skipped"] = "succeeded",
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
    offset: Annotated[int, Query(ge=0, le=INT4_MAX)] = 0,
) -> dict:
    return attack_records_view(session, job_id, status, limit, offset)


@router.get(
    "/{job_id}/predictions",
    response_model=PredictionSamplesOut,
    responses=ERRORS,
    summary="A fine-tune job's predictions of one split (default: its first evaluation split), a page at a "
    "time, from its predictions folder: source / references / output (generation), the answer "
    "beside the gold ones (span extraction), tagged sentences with errors marked (token "
    "classification), the choice beside the gold one (multiple choice), the predicted class beside "
    "the gold one (classification); with the run's confusion report",
)
def prediction_samples(
    job_id: JobIdPath,
    session: SessionDep,
    split: Annotated[str | None, Query(max_length=100, pattern=r"^[A-Za-z0-9_\-]+$")] = None,
    errors_only: bool = False,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
    offset: Annotated[int, Query(ge=0, le=INT4_MAX)] = 0,
) -> dict:
    return prediction_samples_view(session, job_id, split, limit, offset, errors_only)

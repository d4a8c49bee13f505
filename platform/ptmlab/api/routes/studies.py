"""/api/v1/studies: hyperparameter studies (ptmlab.studies). Creating one checks it whole (search
space, one composed point, every searched value against the remote-submission rules, the
objective, the pruner) and queues its first `n_parallel` trials (at most 64, so a request's work
is bounded: ptmlab.studies.spec.MAX_PARALLEL); a refusal is 422 with one line and nothing
queued. Workers drive a study from then on; stop and resume are here too."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from optuna.distributions import CategoricalDistribution
from sqlalchemy import func, select

from ptmlab import studies
from ptmlab.api.deps import Authorized, GroupId, PageLimit, PageOffset, RootsDep, SessionDep
from ptmlab.api.schemas import ErrorOut, StudyOut, StudyPage
from ptmlab.api.validation import check_override_allowed, compose_checked
from ptmlab.db import Study
from ptmlab.studies.search_space import format_value

router = APIRouter(prefix="/studies", tags=["studies"])
ERRORS = {401: {"model": ErrorOut}, 404: {"model": ErrorOut}, 409: {"model": ErrorOut}, 422: {"model": ErrorOut}}


def plan_remote_study(spec: studies.StudySpec, roots) -> studies.StudyPlan:
    plan = studies.plan_study(spec, compose=lambda overrides: compose_checked(overrides, roots, stage=spec.stage))
    # The composed point checked one value of each parameter; a path or a code key may hide in another.
    for key, dist in plan.space.items():
        values = dist.choices if isinstance(dist, CategoricalDistribution) else (dist.low, dist.high)
        for value in values:
            check_override_allowed(f"{key}={format_value(value)}", roots)
    return plan


@router.post(
    "",
    response_model=StudyOut,
    responses=ERRORS,
    dependencies=[Authorized],
    summary="Check a study and queue its first trials",
)
def create_study(body: studies.StudySpec, request: Request, session: SessionDep, roots: RootsDep):
    plan = plan_remote_study(body, roots)
    url = request.app.state.database_url
    study = studies.create_study(session, plan, url=url, driver_id="api", submitted_remotely=True)
    return JSONResponse(status_code=201, content=studies.study_status(session, study.id, url=url))


@router.get("", response_model=StudyPage, responses=ERRORS, summary="Studies, newest first")
def list_studies(request: Request, session: SessionDep, limit: PageLimit = 50, offset: PageOffset = 0) -> dict:
    total = session.scalar(select(func.count()).select_from(Study))
    ids = session.scalars(select(Study.id).order_by(Study.created_at.desc()).limit(limit).offset(offset)).all()
    url = request.app.state.database_url
    return {"total": total, "items": [studies.study_status(session, i, url=url) for i in ids]}


@router.get("/{study_id}", response_model=StudyOut, responses=ERRORS, summary="A study and its trials")
def get_study(study_id: GroupId, request: Request, session: SessionDep) -> dict:
    return studies.study_status(session, study_id, url=request.app.state.database_url)


@router.post(
    "/{study_id}/stop",
    response_model=StudyOut,
    responses=ERRORS,
    dependencies=[Authorized],
    summary="Stop a study: queued trials withdrawn, running ones stopped",
)
def stop_study(study_id: GroupId, request: Request, session: SessionDep) -> dict:
    url = request.app.state.database_url
    studies.stop_study(session, study_id, url=url)
    return studies.study_status(session, study_id, url=url)


@router.post(
    "/{study_id}/resume",
    response_model=StudyOut,
    responses=ERRORS,
    dependencies=[Authorized],
    summary="Resume a stopped study: the trials it still owes are asked again",
)
def resume_study(study_id: GroupId, request: Request, session: SessionDep) -> dict:
    url = request.app.state.database_url
    studies.resume_study(session, study_id, url=url, driver_id="api")
    return studies.study_status(session, study_id, url=url)

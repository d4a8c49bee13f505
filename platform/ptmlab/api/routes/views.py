"""/api/v1/views: the JSON the dashboard's pages draw (ptmlab.views). Read-only; every view but
the metric curves reads the platform's `results` table, never MLflow. Each route's `response_model`
(ptmlab.api.view_models) is the JSON it sends; the routes that send pre-encoded bytes (`_json`) are
not validated by FastAPI, tests/platform/test_view_models.py holds them to it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import PlainTextResponse, Response

from ptmlab import queue, views
from ptmlab.api.deps import SessionDep
from ptmlab.api.schemas import INT4_MAX, ErrorOut, ModeFilter
from ptmlab.api.view_models import (
    CompareOut,
    CompressionOut,
    CurvesOut,
    DriftSourcesOut,
    JobViewOut,
    LeaderboardCompareOut,
    LeaderboardOut,
    OverviewOut,
    ProbeDriftOut,
    ProbingOut,
    RobustnessOut,
    RunsOut,
    StudyViewOut,
    SweepViewOut,
)
from ptmlab.contracts.summaries import PROBE_LAYER_METRICS
from ptmlab.db.models import Job, JobDependency, Result
from ptmlab.errors import ConfigError
from ptmlab.leaderboard.grouping import parse_adaptation_filter
from ptmlab.results import parse_tag_filter
from ptmlab.views.encoded import json_body
from ptmlab.views.studies import study_view

router = APIRouter(prefix="/views", tags=["dashboard views"])
ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}, 422: {"model": ErrorOut}}
# format=csv|latex: the same view as text (the json format's body is the route's response_model)
EXPORTS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    200: {"content": {"text/csv": {"schema": {"type": "string"}}, "application/x-tex": {"schema": {"type": "string"}}}},
}
Name = Annotated[str | None, Query(max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")]
TagFilter = Annotated[str | None, Query(max_length=600, description="key=value[,key=value]")]
Benchmark = Annotated[
    str, Query(max_length=40, pattern=r"^[A-Za-z0-9_]+$", description="glue | superglue | tasks | generation")
]
JobIds = Annotated[str | None, Query(max_length=400, pattern=r"^[0-9, ]+$", description="job ids: 14,13")]
# Rows-by keys: summary keys and dotted config keys (`model,objective,stage.lr`)
GroupBy = Annotated[str, Query(max_length=400, pattern=r"^[A-Za-z0-9_.:/\-]+(,[A-Za-z0-9_.:/\-]+)*,?$")]
Pool = Annotated[bool, Query(description="pool runs of different configs under one row (their spread is over runs)")]


def _json(view: dict[str, Any]) -> Response:
    # The views are plain JSON already (numbers made finite by ptmlab.views); FastAPI's generic
    # encoder would walk every one of 10,000 rows' values again. A cached view's bytes are kept
    # and long lists joined from their items' texts (ptmlab.views.encoded).
    return Response(json_body(view), media_type="application/json")


def _ids(runs: str) -> list[str]:
    return [r.strip() for r in runs.split(",") if r.strip()]


@router.get(
    "/overview",
    response_model=OverviewOut,
    responses=ERRORS,
    summary="Job counts, result counts, latest jobs and results",
)
def overview(session: SessionDep) -> dict[str, Any]:
    return views.overview_view(session)


@router.get(
    "/leaderboard",
    response_model=LeaderboardOut,
    responses=EXPORTS,
    summary="A benchmark's leaderboard (glue, superglue, tasks, generation) rows with the result ids behind each cell "
    "and each row's footprint (trainable parameters, delta size); adaptation=lora,bitfit keeps "
    "those modes; format=csv|latex exports",
)
def leaderboard(
    session: SessionDep,
    sweep_id: Name = None,
    tag: TagFilter = None,
    adaptation: ModeFilter = None,
    group_by: GroupBy = "model,objective,adaptation",
    pool: Pool = False,
    format: Literal["json", "csv", "latex"] = "json",
    benchmark: Benchmark = "glue",
):
    tags, modes = parse_tag_filter(tag), parse_adaptation_filter(adaptation)
    keys = [k for k in group_by.split(",") if k]
    if not keys:
        raise ConfigError("group_by: name at least one summary key")
    if format == "json":
        return _json(
            views.leaderboard_view(
                session, sweep_id=sweep_id, tags=tags, group_by=keys, adaptations=modes, benchmark=benchmark, pool=pool
            )
        )
    text = views.leaderboard_export(
        session, format, sweep_id=sweep_id, tags=tags, group_by=keys, adaptations=modes, benchmark=benchmark, pool=pool
    )
    media, ext = ("text/csv", "csv") if format == "csv" else ("application/x-tex", "tex")
    return PlainTextResponse(
        text, media_type=media, headers={"Content-Disposition": f'attachment; filename="{benchmark}_leaderboard.{ext}"'}
    )


RowLabel = Annotated[
    str, Query(min_length=1, max_length=600, description="a row's configuration values joined by ' / '")
]


@router.get(
    "/leaderboard/compare",
    response_model=LeaderboardCompareOut,
    responses=EXPORTS,
    summary="Two leaderboard rows over seeds: per task and GLUE average, difference of means; a 95 % CI and "
    "p-value only with ≥ 3 seeds a side and no pooled configs (paired t-test over common seeds, "
    "Welch otherwise), else the reason and the raw values; format=csv|latex states n and the test "
    "beside every figure",
)
def leaderboard_compare(
    session: SessionDep,
    a: RowLabel,
    b: RowLabel,
    sweep_id: Name = None,
    tag: TagFilter = None,
    adaptation: ModeFilter = None,
    benchmark: Benchmark = "glue",
    group_by: GroupBy = "model,objective,adaptation",
    pool: Pool = False,
    format: Literal["json", "csv", "latex"] = "json",
):
    keys = [k for k in group_by.split(",") if k]
    if not keys:
        raise ConfigError("group_by: name at least one summary key")
    options = {
        "sweep_id": sweep_id,
        "tags": parse_tag_filter(tag),
        "group_by": keys,
        "adaptations": parse_adaptation_filter(adaptation),
        "benchmark": benchmark,
        "pool": pool,
    }
    if format == "json":
        return _json(views.leaderboard_compare(session, a, b, **options))
    from ptmlab.views.leaderboard import leaderboard_compare_export

    media, ext = ("text/csv", "csv") if format == "csv" else ("application/x-tex", "tex")
    return PlainTextResponse(
        leaderboard_compare_export(session, format, a, b, **options),
        media_type=media,
        headers={"Content-Disposition": f'attachment; filename="{benchmark}_compare.{ext}"'},
    )


@router.get("/sweep/{sweep_id}", response_model=SweepViewOut, responses=ERRORS, include_in_schema=False)
@router.get(
    "/sweeps/{sweep_id}",
    response_model=SweepViewOut,
    responses=ERRORS,
    summary="A sweep's runs by swept value: per value mean ± std of the score over its jobs (seeds "
    "included), the runs for parallel coordinates, the best run (degenerate when at or below its "
    "majority-class baseline) and the top runs",
)
def sweep(session: SessionDep, sweep_id: Annotated[str, Path(max_length=32, pattern=r"^[A-Za-z0-9_\-]+$")]) -> Response:
    from ptmlab.views.sweep import sweep_view

    return _json(sweep_view(session, sweep_id))


@router.get(
    "/probe-drift",
    response_model=ProbeDriftOut | DriftSourcesOut,
    responses=ERRORS,
    summary="A source model's probed descendants (fine-tuned, compressed) as per-layer curves beside its own, "
    "with the difference per layer; without `source`: the model jobs to choose from",
)
def probe_drift(
    session: SessionDep,
    source: Annotated[int | None, Query(ge=1, le=INT4_MAX)] = None,
    task: Name = None,
    metric: Literal[PROBE_LAYER_METRICS] = "accuracy",  # type: ignore[valid-type]  # the probes' per-layer keys, one list
) -> dict[str, Any]:
    from ptmlab.views.drift import drift_sources, drift_view

    if source is None:
        return {"sources": drift_sources(session)}
    return drift_view(session, source, task, metric)


@router.get(
    "/compression",
    response_model=CompressionOut,
    responses=ERRORS,
    summary="Compressed models of one task: points, uncompressed references, Pareto fronts per x axis; "
    "with study=<id>, one study's trials and its own Pareto front",
)
def compression(
    session: SessionDep,
    task: Name = None,
    sweep_id: Name = None,
    tag: TagFilter = None,
    study: Annotated[str | None, Query(max_length=32, pattern=r"^[A-Za-z0-9_\-]+$")] = None,
) -> Response:
    return _json(
        views.compression_view(session, task=task, sweep_id=sweep_id, tags=parse_tag_filter(tag), study_id=study)
    )


@router.get(
    "/robustness",
    response_model=RobustnessOut,
    responses=ERRORS,
    summary="Attack results: one row per attacked model (what made it: fine-tune, adaptation, defence, "
    "compress method), per recipe accuracy under attack, success rate, perturbed-word ratio; "
    "pipeline=<id> keeps one pipeline's attacks",
)
def robustness(
    session: SessionDep,
    task: Name = None,
    sweep_id: Name = None,
    tag: TagFilter = None,
    pipeline: Annotated[str | None, Query(max_length=32, pattern=r"^[A-Za-z0-9_\-]+$")] = None,
) -> Response:
    return _json(
        views.robustness_view(session, pipeline_id=pipeline, task=task, sweep_id=sweep_id, tags=parse_tag_filter(tag))
    )


@router.get(
    "/probing",
    response_model=ProbingOut,
    responses=ERRORS,
    summary="Per-layer probe curves per model × probe task, selectivity, structural probes, head heatmaps",
)
def probing(session: SessionDep, sweep_id: Name = None, tag: TagFilter = None) -> Response:
    return _json(views.probing_view(session, sweep_id=sweep_id, tags=parse_tag_filter(tag)))


Column = Annotated[str, Query(max_length=200, pattern=r"^[A-Za-z0-9_.:/\-]+$")]


@router.get(
    "/runs",
    response_model=RunsOut,
    responses=EXPORTS,
    summary="Every result as a row: any summary or config key (`stage.lr`) as a column, a filter, a sort and a "
    "group (group_by: mean ± std, n, min/max per group, what differs inside it); format=csv|latex "
    "exports",
)
def runs(
    session: SessionDep,
    kind: Name = None,
    q: Annotated[str | None, Query(max_length=200)] = None,
    filter: Annotated[
        list[str] | None, Query(max_length=20, description="<column><op><value>, op = != > >= < <= ~ (contains)")
    ] = None,
    sort: Column = "id",
    order: Literal["asc", "desc"] = "desc",
    column: Annotated[list[Column] | None, Query(max_length=30, description="columns to show; default: a few")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=INT4_MAX)] = 0,
    group_by: Annotated[
        str | None,
        Query(
            max_length=400,
            pattern=r"^[A-Za-z0-9_.:/\-]+(,[A-Za-z0-9_.:/\-]+)*,?$",
            description="group rows by these keys: mean ± std, n, min/max per group",
        ),
    ] = None,
    format: Literal["json", "csv", "latex"] = "json",
):
    view = views.runs_view(
        session,
        kind=kind,
        q=q,
        filters=filter,
        sort=sort,
        order=order,
        columns=column,
        limit=limit,
        offset=offset,
        group_by=(group_by or "").split(","),
    )
    if format == "json":
        return _json(view)
    from ptmlab.views.runs_export import render

    media, ext = ("text/csv", "csv") if format == "csv" else ("application/x-tex", "tex")
    return PlainTextResponse(
        render(view, format), media_type=media, headers={"Content-Disposition": f'attachment; filename="runs.{ext}"'}
    )


# Results recorded by hand have no job to name them: only those are asked for by result id.
HandRecorded = Annotated[
    str | None,
    Query(max_length=400, pattern=r"^[0-9, ]+$", description="results recorded by hand, without a job (their ids)"),
]


def _result_ids(session, jobs: str | None, runs: str | None = None) -> list[int]:
    from ptmlab.views.compare import _parse_ids, job_result_ids

    chosen: list[int] = job_result_ids(session, _ids(jobs)) if jobs and _ids(jobs) else []
    if runs and _ids(runs):
        ids = _parse_ids(_ids(runs))
        owned = session.execute(
            sa.select(Result.id, Result.job_id).where(Result.id.in_(ids), Result.job_id.is_not(None)).limit(1)
        ).first()
        if owned is not None:  # one name per run: its job's
            raise ConfigError(
                f"runs: result {owned.id} is job {owned.job_id}'s; compare it by its job: jobs={owned.job_id}"
            )
        chosen += ids  # results recorded by hand, beside the jobs'
    if chosen:
        return chosen
    raise ConfigError("jobs: give the job ids to compare, e.g. jobs=14,13")


@router.get(
    "/compare",
    response_model=CompareOut,
    responses=ERRORS,
    summary="2-10 runs side by side, named by their jobs (jobs=14,13; each job's newest result): the main "
    "score with its deltas, the numbers that differ, the config keys that differ, every config",
)
def compare(session: SessionDep, jobs: JobIds = None, runs: HandRecorded = None) -> dict[str, Any]:
    return views.compare_view(session, _result_ids(session, jobs, runs))


@router.get(
    "/curves",
    response_model=CurvesOut,
    responses=ERRORS,
    summary="Metric curves of runs (jobs=14,13) from MLflow's metric history",
)
def curves(
    session: SessionDep,
    request: Request,
    jobs: JobIds = None,
    runs: HandRecorded = None,
    key: Annotated[list[str] | None, Query(max_length=40, description="metric keys; default: all")] = None,
) -> dict[str, Any]:
    # the MLflow store of this app's settings (the process-wide ones may be another home's)
    tracking = request.app.state.settings.resolved_tracking_uri
    return views.metric_curves(session, _result_ids(session, jobs, runs), keys=key, tracking_uri=tracking)


@router.get(
    "/jobs/{job_id}",
    response_model=JobViewOut,
    response_model_exclude_unset=True,  # a job's progress as its stage wrote it, no defaults filled in
    responses=ERRORS,
    summary="A job's page extras: resolved config, parents and children, results (each in its "
    "stage's terms, with its throughput), MLflow link",
)
def job_detail(job_id: Annotated[int, Path(ge=1, le=INT4_MAX)], session: SessionDep) -> dict[str, Any]:
    from ptmlab.tracking import mlflow_run_link
    from ptmlab.views.job_results import result_digest
    from ptmlab.views.jobs import resolved_job_config, training_speed

    job = queue.get_job(session, job_id)
    children = session.scalars(sa.select(JobDependency.job_id).where(JobDependency.parent_id == job_id)).all()
    related = {j.id: j for j in session.scalars(sa.select(Job).where(Job.id.in_([*job.parent_ids, *children])))}
    results = session.execute(
        sa.select(Result.id, Result.kind, Result.summary).where(Result.job_id == job_id).order_by(Result.id)
    ).all()
    config, source = resolved_job_config(job)
    return {
        "job": job.to_dict(),
        "parents": [_brief(related[i]) for i in job.parent_ids if i in related],
        "children": [_brief(related[i]) for i in sorted(children) if i in related],
        "results": [
            {
                "id": r.id,
                "kind": r.kind,
                "throughput": training_speed(r.summary),
                "digest": result_digest(r.kind, r.summary),
            }
            for r in results
        ],
        "mlflow_url": mlflow_run_link(job.mlflow_run_id),
        "config": config,
        "config_source": source,
    }


@router.get(
    "/studies/{study_id}",
    response_model=StudyViewOut,
    responses=ERRORS,
    summary="A study's page: trials (state, params, objective, steps trained, job, intermediate values), "
    "the best trial, the optimisation history, Optuna's parameter importances or why there are none",
)
def study(
    study_id: Annotated[str, Path(max_length=32, pattern=r"^[A-Za-z0-9_\-]+$")], request: Request, session: SessionDep
) -> Response:
    return _json(study_view(session, study_id, url=request.app.state.database_url))


def _brief(job) -> dict[str, Any]:
    return {"id": job.id, "name": job.name, "stage": job.stage, "status": job.status}

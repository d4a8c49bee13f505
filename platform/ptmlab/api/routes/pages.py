"""The dashboard's HTML pages (Jinja2 templates in web/templates) and its static files.

Pages render what they can on the server (the front page entirely) and plain JavaScript modules
in web/static/js fill in the rest from /api/v1 and /api/v1/views, polling while jobs run.
Plotly.js is a partial bundle vendored in web/static/vendor (scripts/build_plotly_bundle.sh): no CDN.
Pages name the vendored files and the stylesheet with their content hash (`asset_url`), so those
are cached for a year and a new release's copy is fetched at once.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Annotated

import sqlalchemy as sa
from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.openapi.docs import get_redoc_html
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from ptmlab import queue, views
from ptmlab.api.deps import GroupId, PageOffset, SessionDep
from ptmlab.api.schemas import INT4_MAX
from ptmlab.contracts.summaries import PROBE_LAYER_METRICS
from ptmlab.db.models import Result
from ptmlab.errors import NotFoundError
from ptmlab.queue.groups import summarise_groups, sweep_jobs
from ptmlab.settings import Settings
from ptmlab.studies import get_study
from ptmlab.views.studies import studies_list_view

WEB_DIR = Settings().web_dir  # read once: templates are loaded at import
STATIC_DIR = WEB_DIR / "static"
STATIC_CACHE = "public, max-age=300"
IMMUTABLE_CACHE = "public, max-age=31536000, immutable"  # a URL naming its content's hash

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(WEB_DIR / "templates"))


@functools.cache
def _content_hash(path: Path, mtime_ns: int) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def asset_version(path: str) -> str:
    """The hash of a static file's content (recomputed when the file changes, else cached)."""
    target = STATIC_DIR / path
    return _content_hash(target, target.stat().st_mtime_ns)


def asset_url(path: str) -> str:
    """`/static/<path>?v=<content hash>`: the URL a template gives a file it may cache for long."""
    return f"/static/{path}?v={asset_version(path)}"


def _cache_control(path: str, request: Request) -> str:
    version = request.query_params.get("v")
    return IMMUTABLE_CACHE if version and version == asset_version(path) else STATIC_CACHE


templates.env.globals["asset_url"] = asset_url
templates.env.globals["probe_layer_metrics"] = PROBE_LAYER_METRICS  # the drift page's metric choices

NAV = [
    ("/", "Overview"),
    ("/jobs", "Jobs"),
    ("/runs", "Runs"),
    ("/sweeps", "Sweeps"),
    ("/pipelines", "Pipelines"),
    ("/studies", "Studies"),
    ("/submit", "Submit"),
    ("/leaderboard", "Leaderboard"),
    ("/compression", "Compression"),
    ("/robustness", "Robustness"),
    ("/probing", "Probing"),
    ("/compare", "Compare"),
    ("/docs", "API docs"),
]


def _page(request: Request, template: str, active: str, title: str, status_code: int = 200, **context) -> HTMLResponse:
    return templates.TemplateResponse(
        request, template, {"nav": NAV, "active": active, "title": title, **context}, status_code=status_code
    )


def not_found_page(request: Request, message: str, active: str = "") -> HTMLResponse:
    return _page(request, "not_found.html", active, "Not found", status_code=404, message=message)


@router.get("/favicon.ico")
def favicon() -> FileResponse:
    return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml", headers={"Cache-Control": STATIC_CACHE})


# ReDoc from fastapi-offline's copy, served here rather than by FastAPIOffline: its footer loads the
# Redocly logo from cdn.redoc.ly, a request that fails offline; the copy points it at our favicon.
REDOC_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"


@functools.cache
def redoc_js() -> bytes:
    import fastapi_offline

    return (
        (Path(fastapi_offline.__file__).parent / "static" / "redoc.standalone.js")
        .read_bytes()
        .replace(REDOC_CDN_LOGO, b"/favicon.ico")
    )


@router.get("/static/vendor/redoc.standalone.js")
def redoc_js_file() -> Response:
    return Response(redoc_js(), media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})


@router.get("/redoc", response_class=HTMLResponse)
def redoc_page(request: Request) -> HTMLResponse:
    return get_redoc_html(
        openapi_url=request.app.openapi_url,
        title="ptmlab - ReDoc",
        with_google_fonts=False,
        redoc_js_url="/static/vendor/redoc.standalone.js",
        redoc_favicon_url="/favicon.ico",
    )


PLOTLY_JS = "vendor/plotly.min.js"


def plotly_js_path() -> Path:
    return STATIC_DIR / PLOTLY_JS


@functools.cache
def _plotly_js_gzip(mtime_ns: int) -> bytes:
    import gzip

    return gzip.compress(plotly_js_path().read_bytes(), compresslevel=9, mtime=0)


def plotly_js_gzip() -> bytes:
    """The bundle gzip-compressed at the highest level once (not per request, as the middleware would)."""
    return _plotly_js_gzip(plotly_js_path().stat().st_mtime_ns)


@router.get("/static/vendor/plotly.min.js")
def plotly_js(request: Request) -> Response:
    headers = {"Cache-Control": _cache_control(PLOTLY_JS, request), "Vary": "Accept-Encoding"}
    if "gzip" in request.headers.get("accept-encoding", ""):
        return Response(plotly_js_gzip(), media_type="text/javascript", headers={**headers, "Content-Encoding": "gzip"})
    return FileResponse(plotly_js_path(), media_type="text/javascript", headers=headers)


@router.get("/static/{path:path}")
def static_file(path: str, request: Request) -> Response:
    root = STATIC_DIR.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        raise NotFoundError(f"static file {path!r} not found")
    media = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}.get(target.suffix)
    return FileResponse(target, media_type=media, headers={"Cache-Control": _cache_control(path, request)})


@router.get("/", response_class=HTMLResponse)
def overview_page(request: Request, session: SessionDep) -> HTMLResponse:
    return _page(request, "index.html", "/", "Overview", data=views.overview_view(session))


@router.get("/jobs", response_class=HTMLResponse)
def jobs_page(request: Request) -> HTMLResponse:
    return _page(request, "jobs.html", "/jobs", "Jobs")


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(
    request: Request, job_id: Annotated[int, PathParam(ge=1, le=INT4_MAX)], session: SessionDep
) -> HTMLResponse:
    try:
        job = queue.get_job(session, job_id).to_dict()
    except NotFoundError as exc:
        return not_found_page(request, str(exc), "/jobs")
    return _page(request, "job.html", "/jobs", f"Job {job_id}", job=job)


GROUP_PAGE_SIZE = 50
GROUP_TEXT = {
    "sweep": (
        "Sweeps",
        "A sweep is a grid of jobs queued at once (`ptmlab sweep`, `-m` with the ptmlab launcher, "
        "the submit form's sweep builder).",
        "No sweeps yet: `ptmlab sweep` or a `-m` run queues one.",
    ),
    "pipeline": (
        "Pipelines",
        "A pipeline is a graph of jobs, each waiting for its parents (conf/pipeline/*.yaml, `ptmlab pipeline`).",
        "No pipelines yet: `ptmlab pipeline <name>` queues one.",
    ),
}


def _group_list_page(request: Request, session, kind: str, offset: int) -> HTMLResponse:
    items, total = queue.list_groups(session, kind, limit=GROUP_PAGE_SIZE, offset=offset)
    title, about, empty = GROUP_TEXT[kind]
    return _page(
        request,
        "groups.html",
        f"/{kind}s",
        title,
        kind=kind,
        items=items,
        total=total,
        offset=offset,
        limit=GROUP_PAGE_SIZE,
        about=about,
        empty=empty,
    )


@router.get("/sweeps", response_class=HTMLResponse)
def sweeps_page(request: Request, session: SessionDep, offset: PageOffset = 0) -> HTMLResponse:
    return _group_list_page(request, session, "sweep", offset)


@router.get("/pipelines", response_class=HTMLResponse)
def pipelines_page(request: Request, session: SessionDep, offset: PageOffset = 0) -> HTMLResponse:
    return _group_list_page(request, session, "pipeline", offset)


@router.get("/sweeps/{sweep_id}", response_class=HTMLResponse)
def sweep_page(request: Request, sweep_id: GroupId, session: SessionDep) -> HTMLResponse:
    try:
        sweep = queue.get_sweep(session, sweep_id)
    except NotFoundError as exc:
        return not_found_page(request, str(exc), "/sweeps")
    [summary] = summarise_groups(session, "sweep", [sweep])
    varied, jobs = sweep_jobs(session, sweep_id)
    return _page(
        request, "sweep.html", "/sweeps", f"Sweep {sweep.name or sweep.id}", sweep=summary, varied=varied, jobs=jobs
    )


@router.get("/pipelines/{pipeline_id}", response_class=HTMLResponse)
def pipeline_page(request: Request, pipeline_id: GroupId, session: SessionDep) -> HTMLResponse:
    try:
        pipeline = queue.get_pipeline(session, pipeline_id)
    except NotFoundError as exc:
        return not_found_page(request, str(exc), "/pipelines")
    return _page(
        request,
        "pipeline.html",
        "/pipelines",
        f"Pipeline {pipeline.name}",
        pipeline={"id": pipeline.id, "name": pipeline.name},
    )


@router.get("/studies", response_class=HTMLResponse)
def studies_page(request: Request, session: SessionDep, offset: PageOffset = 0) -> HTMLResponse:
    items, total = studies_list_view(session, url=request.app.state.database_url, limit=GROUP_PAGE_SIZE, offset=offset)
    return _page(
        request, "studies.html", "/studies", "Studies", items=items, total=total, offset=offset, limit=GROUP_PAGE_SIZE
    )


@router.get("/studies/{study_id}", response_class=HTMLResponse)
def study_page(request: Request, study_id: GroupId, session: SessionDep) -> HTMLResponse:
    try:
        study = get_study(session, study_id).to_dict()
    except NotFoundError as exc:
        return not_found_page(request, str(exc), "/studies")
    return _page(request, "study.html", "/studies", f"Study {study['name'] or study['id']}", study=study)


# Pages whose JavaScript fetches all they show: path -> (template, nav entry, title).
TEMPLATE_PAGES = {
    "/submit": ("submit.html", "/submit", "Submit"),
    "/leaderboard": ("leaderboard.html", "/leaderboard", "Leaderboard"),
    "/compression": ("compression.html", "/compression", "Compression trade-offs"),
    "/probing": ("probing.html", "/probing", "Probing"),
    "/probing/drift": ("drift.html", "/probing", "Probe drift"),
    "/runs": ("runs.html", "/runs", "Runs"),
}


def _template_page(template: str, active: str, title: str):
    def template_page(request: Request) -> HTMLResponse:
        return _page(request, template, active, title)

    return template_page


for _path, (_template, _active, _title) in TEMPLATE_PAGES.items():
    router.add_api_route(
        _path, _template_page(_template, _active, _title), methods=["GET"], response_class=HTMLResponse
    )


@router.get("/robustness", response_class=HTMLResponse)
def robustness_page(
    request: Request,
    session: SessionDep,
    pipeline: Annotated[str | None, Query(max_length=32, pattern=r"^[A-Za-z0-9_\-]+$")] = None,
) -> HTMLResponse:
    if pipeline is not None:
        try:
            queue.get_pipeline(session, pipeline)
        except NotFoundError as exc:
            return not_found_page(request, str(exc), "/robustness")
    return _page(request, "robustness.html", "/robustness", "Robustness")


@router.get("/compare", response_class=HTMLResponse)
def compare_page(
    request: Request,
    session: SessionDep,
    jobs: Annotated[str, Query(max_length=400)] = "",
    runs: Annotated[str, Query(max_length=400)] = "",
) -> Response:
    """Runs are compared by their jobs: a link naming results (`runs=13`) of runs that have a job
    opens the same comparison by those jobs (`jobs=14`); results recorded by hand stay `runs=`."""
    ids = [int(x) for x in runs.replace(" ", "").split(",") if x.isdigit() and 0 < int(x) <= INT4_MAX]
    if ids and len(ids) == len([x for x in runs.split(",") if x.strip()]):
        owners = dict(session.execute(sa.select(Result.id, Result.job_id).where(Result.id.in_(ids))).tuples().all())
        moved = [owners[i] for i in ids if owners.get(i) is not None]
        if moved:
            kept = [str(i) for i in ids if owners.get(i) is None]
            chosen = list(dict.fromkeys([x.strip() for x in jobs.split(",") if x.strip()] + [str(j) for j in moved]))
            query = "&".join(q for q in (f"jobs={','.join(chosen)}", f"runs={','.join(kept)}" if kept else "") if q)
            return RedirectResponse(f"/compare?{query}", status_code=307)
    return _page(request, "compare.html", "/compare", "Compare runs", jobs=jobs, runs=runs, single=False)


@router.get("/runs/{result_id}", response_class=HTMLResponse)
def run_page(
    request: Request, result_id: Annotated[int, PathParam(ge=1, le=INT4_MAX)], session: SessionDep
) -> Response:
    """A run is named by its job: a result's page is its job's page (a result recorded by hand,
    without a job, keeps a page of its own)."""
    result = session.get(Result, result_id)
    if result is None:
        return not_found_page(request, f"result {result_id} not found", "/compare")
    if result.job_id is not None:
        return RedirectResponse(f"/jobs/{result.job_id}", status_code=307)
    return _page(request, "compare.html", "/compare", f"Result {result_id}", jobs="", runs=str(result_id), single=True)

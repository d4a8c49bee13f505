"""The dashboard's HTML pages (Jinja2 templates in web/templates) and its static files.

Pages render what they can on the server (the front page entirely) and plain JavaScript modules
in web/static/js fill in the rest from /api/v1 and /api/v1/views, polling while jobs run.
Plotly.js is the copy bundled in the installed `plotly` Python package: no CDN, no Node build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.templating import Jinja2Templates

from ptmlab import queue, views
from ptmlab.api.deps import SessionDep
from ptmlab.api.schemas import INT4_MAX
from ptmlab.errors import NotFoundError
from ptmlab.settings import Settings

WEB_DIR = Settings().web_dir  # read once: templates are loaded at import
STATIC_DIR = WEB_DIR / "static"
STATIC_CACHE = "public, max-age=300"

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(WEB_DIR / "templates"))

NAV = [("/", "Overview"), ("/jobs", "Jobs"), ("/submit", "Submit"), ("/leaderboard", "GLUE leaderboard"),
       ("/compression", "Compression"), ("/probing", "Probing"), ("/compare", "Compare runs")]


def _page(request: Request, template: str, active: str, title: str, status_code: int = 200, **context) -> HTMLResponse:
    return templates.TemplateResponse(request, template, {"nav": NAV, "active": active, "title": title, **context},
                                      status_code=status_code)


def plotly_js_path() -> Path:
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


@router.get("/static/vendor/plotly.min.js")
def plotly_js() -> FileResponse:
    return FileResponse(plotly_js_path(), media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})


@router.get("/static/{path:path}")
def static_file(path: str) -> Response:
    root = STATIC_DIR.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        raise NotFoundError(f"static file {path!r} not found")
    media = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}.get(target.suffix)
    return FileResponse(target, media_type=media, headers={"Cache-Control": STATIC_CACHE})


@router.get("/", response_class=HTMLResponse)
def overview_page(request: Request, session: SessionDep) -> HTMLResponse:
    return _page(request, "index.html", "/", "Overview", data=views.overview_view(session))


@router.get("/jobs", response_class=HTMLResponse)
def jobs_page(request: Request) -> HTMLResponse:
    return _page(request, "jobs.html", "/jobs", "Jobs")


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, job_id: Annotated[int, PathParam(ge=1, le=INT4_MAX)], session: SessionDep) -> HTMLResponse:
    try:
        job = queue.get_job(session, job_id).to_dict()
    except NotFoundError as exc:
        return _page(request, "not_found.html", "/jobs", "Not found", status_code=404, message=str(exc))
    return _page(request, "job.html", "/jobs", f"Job {job_id}", job=job)


@router.get("/pipelines/{pipeline_id}", response_class=HTMLResponse)
def pipeline_page(request: Request, pipeline_id: Annotated[str, PathParam(max_length=32, pattern=r"^[A-Za-z0-9_\-]+$")],
                  session: SessionDep) -> HTMLResponse:
    try:
        pipeline = queue.get_pipeline(session, pipeline_id)
    except NotFoundError as exc:
        return _page(request, "not_found.html", "/jobs", "Not found", status_code=404, message=str(exc))
    return _page(request, "pipeline.html", "/jobs", f"Pipeline {pipeline.name}", pipeline={"id": pipeline.id,
                 "name": pipeline.name})


@router.get("/submit", response_class=HTMLResponse)
def submit_page(request: Request) -> HTMLResponse:
    return _page(request, "submit.html", "/submit", "Submit")


@router.get("/leaderboard", response_class=HTMLResponse)
def leaderboard_page(request: Request) -> HTMLResponse:
    return _page(request, "leaderboard.html", "/leaderboard", "GLUE leaderboard")


@router.get("/compression", response_class=HTMLResponse)
def compression_page(request: Request) -> HTMLResponse:
    return _page(request, "compression.html", "/compression", "Compression trade-offs")


@router.get("/probing", response_class=HTMLResponse)
def probing_page(request: Request) -> HTMLResponse:
    return _page(request, "probing.html", "/probing", "Probing")


@router.get("/probing/drift", response_class=HTMLResponse)
def probe_drift_page(request: Request) -> HTMLResponse:
    return _page(request, "drift.html", "/probing", "Probe drift")


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, runs: Annotated[str, Query(max_length=400)] = "") -> HTMLResponse:
    return _page(request, "compare.html", "/compare", "Compare runs", runs=runs, single=False)


@router.get("/runs/{result_id}", response_class=HTMLResponse)
def run_page(request: Request, result_id: Annotated[int, PathParam(ge=1, le=INT4_MAX)]) -> HTMLResponse:
    return _page(request, "compare.html", "/compare", f"Run {result_id}", runs=str(result_id), single=True)

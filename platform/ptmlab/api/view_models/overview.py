"""GET /views/overview (ptmlab.views.overview)."""

from __future__ import annotations

import datetime as dt

from pydantic import Field

from ptmlab.api.schemas import WorkerFields
from ptmlab.api.view_models.common import ViewModel


class OverviewJob(ViewModel):
    id: int
    name: str | None
    stage: str
    status: str
    overrides: list[str]
    created_at: dt.datetime
    pipeline_id: str | None


class OverviewResult(ViewModel):
    id: int
    job_id: int | None
    run: str = Field(description="its job: `#14`, `name (#14)`; `result <id>` without one")
    kind: str
    mlflow_run_id: str | None
    created_at: dt.datetime
    headline: dict[str, int | float | None] = Field(description="the few numbers that say how the run went")
    label: str


class OverviewWorker(WorkerFields):
    model_config = ViewModel.model_config  # an undeclared key fails, as in every view model

    slurm: str | None = Field(description="`job 4711 on gpu-07, 3 h 20 min left` inside a Slurm allocation")


class OverviewOut(ViewModel):
    job_counts: dict[str, int] = Field(description="jobs per state")
    result_counts: dict[str, int] = Field(description="results per kind")
    jobs: list[OverviewJob]
    results: list[OverviewResult]
    workers: list[OverviewWorker]

"""GET /views/overview (ptmlab.views.overview)."""

from __future__ import annotations

import datetime as dt

from pydantic import Field

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


class OverviewWorker(ViewModel):
    id: str
    hostname: str
    pid: int
    gpus: list[int]
    cpu_slots: int
    queues: list[str]
    status: str
    started_at: str | None
    last_heartbeat: str | None
    multinode: bool
    slurm_job_id: str | None
    slurm_node: str | None
    ends_at: str | None
    slurm: str | None = Field(description="`job 4711 on gpu-07, 3 h 20 min left` inside a Slurm allocation")


class OverviewOut(ViewModel):
    job_counts: dict[str, int] = Field(description="jobs per state")
    result_counts: dict[str, int] = Field(description="results per kind")
    jobs: list[OverviewJob]
    results: list[OverviewResult]
    workers: list[OverviewWorker]

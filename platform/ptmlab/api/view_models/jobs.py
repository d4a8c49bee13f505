"""GET /views/jobs/{id}: a job's page extras (ptmlab.views.jobs, ptmlab.views.job_results)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from ptmlab.api.schemas import JobOut
from ptmlab.api.view_models.common import ViewModel
from ptmlab.contracts.summaries import Throughput


class ViewJob(JobOut):
    model_config = ConfigDict(extra="forbid")


class JobBrief(ViewModel):
    id: int
    name: str | None
    stage: str
    status: str


class DigestRow(ViewModel):
    name: str
    value: float | str
    note: str


class ProbeDigest(ViewModel):
    """One probe task's per-layer scores under its metric, beside its random-init twin and baselines."""

    probe_task: str | None
    metric: str
    layers: list[int | None]
    scores: list[float | None]
    control: list[float | None] | None
    random_init: list[float | None] | None
    baselines: dict[str, float]
    best_layer: int | None


class TaskConfusion(ViewModel):
    task: str
    confusion: dict[str, Any]


class ResultDigest(ViewModel):
    """A result in its stage's terms (ptmlab.views.job_results `result_digest`)."""

    rows: list[DigestRow]
    recipe: dict[str, Any] | None = Field(description="the recipe it trained with, as its summary recorded it")
    warnings: list[str]
    probes: list[ProbeDigest]
    task_kind: str | None
    confusion: dict[str, Any] | None = Field(description="the summary's confusion report")
    task_confusions: list[TaskConfusion]


class JobResult(ViewModel):
    id: int
    kind: str
    throughput: Throughput | None
    digest: ResultDigest


class JobViewOut(ViewModel):
    job: ViewJob
    parents: list[JobBrief]
    children: list[JobBrief]
    results: list[JobResult]
    mlflow_url: str | None
    config: dict[str, Any] | None = Field(description="its resolved config, secrets masked; null: see config_source")
    config_source: str = Field(description="run folder | composed from the overrides (not yet run) | why none")

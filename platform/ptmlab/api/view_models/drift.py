"""GET /views/probe-drift (ptmlab.views.drift): a source's probed lineage, or without `source` the
model jobs to choose from."""

from __future__ import annotations

from pydantic import Field

from ptmlab.api.view_models.common import ViewModel


class DriftSourceJob(ViewModel):
    job_id: int
    name: str | None
    stage: str


class DriftSourceChoice(ViewModel):
    job_id: int
    name: str
    stage: str


class DriftCurve(ViewModel):
    job_id: int = Field(description="the model job")
    name: str
    stage: str
    depth: int = Field(description="jobs between it and the source")
    probe_job_id: int
    layers: list[int]
    values: list[float]
    diff: list[float | None] | None = Field(description="minus the source's value per layer; null: no reference")


class ProbeDriftOut(ViewModel):
    source: DriftSourceJob
    task: str | None
    tasks: list[str]
    metric: str
    curves: list[DriftCurve]
    has_reference: bool


class DriftSourcesOut(ViewModel):
    sources: list[DriftSourceChoice]

"""GET /views/compression (ptmlab.views.compression), with `study=<id>` a study's marks."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ptmlab.api.view_models.common import FilterOptions, ViewModel
from ptmlab.api.view_models.robustness import RecipeAttack


class _Measured(ViewModel):
    """A compressed model as the compress summary measured it."""

    id: int
    job_id: int | None
    mlflow_run_id: str | None
    sweep_id: str | None
    method: str
    source: str = Field(description="the reference it compressed (source_ref)")
    task: str
    score: float | None
    params: float | None
    size_bytes: float | None
    latency_ms: float | None
    flops: float | None
    source_score: float | None
    retention: float | None
    size_ratio: float | None
    speedup: float | None
    control_score: float | None
    measured: str = Field(description="how latency was measured")
    retention_vs_control: float | None
    with_extra_training: bool
    config: dict[str, Any] = Field(description="the method's settings as run")
    changed: dict[str, Any] = Field(description="the settings that differ from the method's defaults")
    seed: int | None
    run_dir: str | None


class CompressionPoint(_Measured):
    source_label: str
    robustness: dict[str, RecipeAttack] = Field(description="by attack recipe")
    pareto: dict[str, bool] = Field(description="on the front of each x axis")
    trial: int | None = Field(None, description="with study=: its trial number")
    study_pareto: bool | None = Field(None, description="with study=: on the study's own Pareto front")


class RunReference(_Measured):
    """An uncompressed model measured in a run of its own (method none)."""

    from_: Literal["run"] = Field(alias="from")
    source_label: str
    robustness: dict[str, RecipeAttack]


class SummaryReference(ViewModel):
    """An uncompressed model as its compressed models' summaries measured it."""

    id: None
    method: Literal["uncompressed"]
    source: str
    task: str
    from_: Literal["summary"] = Field(alias="from")
    score: float | None
    params: float | None
    size_bytes: float | None
    latency_ms: float | None
    flops: float | None
    mlflow_run_id: str | None
    source_label: str
    robustness: dict[str, RecipeAttack]


class Axis(ViewModel):
    key: str
    label: str


class ParetoTrial(ViewModel):
    number: int
    job_id: int | None
    values: list[float] | None


class StudyFront(ViewModel):
    id: str
    name: str | None
    status: str
    stage: str
    objectives: list[str]
    directions: list[str]
    pareto_trials: list[ParetoTrial]


class CompressionFilters(ViewModel):
    sweep_id: str | None
    tags: dict[str, str]
    study: str | None = Field(None, description="with study=")


class CompressionOut(ViewModel):
    task: str | None
    tasks: list[str]
    axes: list[Axis]
    metric: str | None = Field(description="the task's main metric: the y axis")
    metric_label: str
    metric_scale: Literal["0-1", "0-100"]
    methods: list[str]
    points: list[CompressionPoint]
    references: list[RunReference | SummaryReference]
    fronts: dict[str, list[int]] = Field(description="point ids on the Pareto front of each x axis")
    recipes: list[str]
    robustness_fronts: dict[str, dict[str, list[int]]] = Field(description="recipe -> x axis -> point ids")
    robustness_missing: dict[str, int] = Field(description="per recipe, the models without an attack result")
    result_count: int
    options: FilterOptions
    filters: CompressionFilters
    study: StudyFront | None = Field(None, description="with study=")

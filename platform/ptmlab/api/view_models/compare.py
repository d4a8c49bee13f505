"""GET /views/compare and /views/curves (ptmlab.views.compare)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ptmlab.api.view_models.common import Scalar, ViewModel

Number = int | float


class CompareDegenerate(ViewModel):
    baseline: float
    metric: str | None
    kind: str


class ComparedRun(ViewModel):
    result_id: int
    job_id: int | None
    label: str
    name: str
    description: str
    stage: str | None
    kind: str | None
    status: str | None
    sweep_id: str | None
    mlflow_run_id: str | None
    mlflow_link: str | None
    mlflow_url: str | None
    run_dir: str | None
    job_status: str | None
    config_source: str = Field(description="run folder | summary | job overrides")
    main_metric: str | None
    main_score: Number | None
    baseline: float | None
    degenerate: CompareDegenerate | None
    tags: dict[str, Any]
    numbers: dict[str, Scalar] = Field(description="every number the row recorded, flattened, as stored")
    layers: list[dict[str, Any]] = Field(description="a probe's per-layer scores as it recorded them")


class WithDeltas(ViewModel):
    key: str
    values: list[Scalar]
    delta: list[Number | None] = Field(description="minus the first run's")
    delta_pct: list[float | None]


class MainScore(ViewModel):
    metric: str | None
    key: str
    values: list[Scalar]
    delta: list[Number | None]
    delta_pct: list[float | None]


class ConfigKey(ViewModel):
    key: str
    values: list[Any] = Field(description="each run's value (null where it has none)")


class ConfigDiff(ViewModel):
    keys: list[ConfigKey]
    differing: int
    total: int


class CompareOut(ViewModel):
    runs: list[ComparedRun]
    main: MainScore
    metrics: list[WithDeltas] = Field(description="the numbers that differ, the main metric's first")
    config_diff: ConfigDiff
    config_all: list[ConfigKey]
    config_keys: list[str]
    differing: list[str]
    configs: dict[str, dict[str, Any]] = Field(description="result id -> its flat config")
    number_keys: list[str]


class MetricCurve(ViewModel):
    result_id: int
    job_id: int | None
    label: str
    steps: list[int]
    values: list[float | None] = Field(description="MLflow's values (NaN as null)")
    times: list[float] = Field(description="seconds since the run started")


class CurvesOut(ViewModel):
    curves: dict[str, list[MetricCurve]] = Field(description="by metric key")
    errors: dict[str, str] = Field(description="result id -> why it has no curves")
    labels: dict[str, str] = Field(description="result id -> its run's name")
    keys: list[str]

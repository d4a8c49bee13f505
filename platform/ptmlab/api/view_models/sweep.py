"""GET /views/sweeps/{id} (ptmlab.views.sweep); the ranking of runs by their searched keys is the
study page's too."""

from __future__ import annotations

from pydantic import Field

from ptmlab.api.view_models.common import Scalar, Spread, ViewModel


class SweepRun(ViewModel):
    job_id: int
    label: str
    seed: int | None
    status: str
    params: dict[str, Scalar] = Field(description="the searched keys' values")
    score: float | None
    baseline: float | None
    degenerate: bool
    metric: str | None
    config_hash: str | None


class SearchedKey(ViewModel):
    key: str
    values: list[Scalar]
    log_scale: bool


class RunStats(ViewModel):
    """The score over a set of runs."""

    n: int
    job_ids: list[int]
    seeds: list[int | None]
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    varying: list[str]
    spread: Spread
    degenerate: int = Field(description="runs at or below their majority-class baseline")
    baseline: float | None


class ValueStats(RunStats):
    value: Scalar


class ConfigStats(RunStats):
    params: dict[str, Scalar]


class BestRun(ViewModel):
    job_id: int
    label: str
    score: float
    params: dict[str, Scalar]
    degenerate: bool
    baseline: float | None


class Ranking(ViewModel):
    metric: str | None
    maximize: bool
    baseline: float | None
    per_value: dict[str, list[ValueStats]] = Field(description="by searched key")
    configs: list[ConfigStats]
    best_config: ConfigStats | None
    top_job_ids: list[int]
    all_degenerate: bool


class SweepViewOut(Ranking):
    id: str
    name: str | None
    jobs: int
    params: list[SearchedKey]
    runs: list[SweepRun]
    best: BestRun | None

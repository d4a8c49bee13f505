"""GET /views/leaderboard and /views/leaderboard/compare (ptmlab.views.leaderboard, ptmlab.stats);
scores on the 0-100 scale."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ptmlab.api.view_models.common import FilterOptions, Spread, ViewModel


class ScaledStat(ViewModel):
    mean: float | None
    std: float | None = Field(description="sample std; null under two runs")
    n: int


class CellDegenerate(ViewModel):
    baseline: float
    metric: str | None
    kind: str = Field(description="majority_class")
    runs: int = Field(description="runs at or below the baseline")


class LeaderboardCell(ScaledStat):
    """One task of one row: its score over the runs shown, the runs' results and jobs."""

    metrics: dict[str, ScaledStat]
    seeds: list[int | None]
    flags: list[str]
    result_ids: list[int]
    runs: int
    job_ids: list[int | None] = Field(description="each run's job, in `seeds` order")
    values: list[float | None] = Field(description="each run's task score, in `seeds` order")
    varying: list[str] = Field(description="config keys besides the seed that differ among its runs")
    spread: Spread
    degenerate: CellDegenerate | None
    mixed_configs: bool
    same_seed_runs: int
    multitask: bool
    multitask_runs: int


class FootprintText(ViewModel):
    trainable: str
    trainable_pct: str
    delta: str


class LeaderboardFootprint(ViewModel):
    """Means over the row's runs; null where no run recorded it."""

    trainable_params: float | None
    total_params: float | None
    delta_params: float | None
    delta_bytes: float | None
    trainable_pct: float | None
    text: FootprintText


class LeaderboardRowOut(ViewModel):
    label: str
    distinct: dict[str, str] = Field(description="config keys telling the row from rows of the same label")
    config: dict[str, str] = Field(description="the rows-by keys' values")
    cells: dict[str, LeaderboardCell] = Field(description="by task")
    flags: list[str]
    glue_tasks: int
    glue_average: float | None
    average: float | None
    average_tasks: int
    footprint: LeaderboardFootprint


class BenchmarkOut(ViewModel):
    name: str
    display_name: str
    averaged: bool


class BenchmarkChoice(ViewModel):
    name: str
    display_name: str


class TaskColumn(ViewModel):
    task: str
    name: str
    glue: bool
    kind: str | None
    metrics: list[str]
    metric_labels: list[str]


class LeaderboardFilters(ViewModel):
    sweep_id: str | None
    tags: dict[str, str]
    adaptation: list[str]
    benchmark: str


class LeaderboardOptions(FilterOptions):
    adaptations: list[str]
    benchmarks: list[BenchmarkChoice]


class LeaderboardOut(ViewModel):
    benchmark: BenchmarkOut
    group_by: list[str]
    pool: bool
    tasks: list[TaskColumn]
    rows: list[LeaderboardRowOut]
    result_count: int
    filters: LeaderboardFilters
    options: LeaderboardOptions


class RowComparison(ViewModel):
    """One task (or the benchmark's average) of row A against row B (ptmlab.stats `SeedComparison`)."""

    task: str
    name: str
    a_mean: float
    b_mean: float
    a_n: int
    b_n: int
    diff: float
    diff_pct: float | None
    a_values: list[float]
    b_values: list[float]
    test: Literal["paired t-test", "Welch t-test"] | None = Field(description="null: no test, see `reason`")
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    paired_seeds: list[int] | None
    reason: str | None
    warnings: list[str]


class LeaderboardCompareOut(ViewModel):
    a: str
    b: str
    comparisons: list[RowComparison]

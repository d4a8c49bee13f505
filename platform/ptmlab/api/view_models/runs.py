"""GET /views/runs (ptmlab.views.runs), with `group_by` its groups (ptmlab.views.run_groups)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ptmlab.api.view_models.common import Baseline, Scalar, Spread, ViewModel


class AvailableColumn(ViewModel):
    key: str
    count: int = Field(description="runs that have it")
    numeric: bool
    source: Literal["summary", "config", "tag"]


class RunRow(ViewModel):
    result_id: int
    job_id: int | None
    job_name: str | None
    label: str
    sweep_id: str | None
    values: dict[str, Scalar] = Field(description="by column")
    degenerate: Baseline | None


class ColumnNumbers(ViewModel):
    mean: float
    std: float | None
    min: float
    max: float
    n: int


class ColumnValue(ViewModel):
    value: str = Field(description="the text every member has")


class ColumnValues(ViewModel):
    values: list[str] = Field(description="the members' distinct texts")


class RunGroup(ViewModel):
    key: dict[str, Scalar]
    n: int
    job_ids: list[int | None]
    labels: list[str]
    seeds: list[int | None]
    members_listed: int
    varying: list[str]
    spread: Spread
    degenerate: int
    baseline: float | None
    baseline_metric: str | None
    values: dict[str, ColumnNumbers | ColumnValue | ColumnValues] = Field(description="by column")


class RunsOut(ViewModel):
    total: int = Field(description="rows matching")
    all: int = Field(description="rows stored")
    limit: int
    offset: int
    sort: str
    order: Literal["asc", "desc"]
    columns: list[str]
    kinds: dict[str, int]
    available: list[AvailableColumn]
    rows: list[RunRow]
    group_by: list[str] | None = Field(None, description="with group_by=")
    group_total: int | None = Field(None, description="with group_by=")
    groups: list[RunGroup] | None = Field(None, description="with group_by=")

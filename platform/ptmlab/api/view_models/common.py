"""What several views share: the strict base, a stored scalar, the sweep and tag filters."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

# A summary, config or tag value as stored (a config key's value, a flattened summary leaf).
Scalar = str | int | float | bool | None
Spread = Literal["seeds", "runs"]  # over seeds where the runs differ in nothing else, else over runs


class ViewModel(BaseModel):
    """A key a view writes and its model does not declare fails validation
    (tests/platform/test_view_models.py): the routes return pre-encoded bytes FastAPI never checks."""

    model_config = ConfigDict(extra="forbid")


class ViewFilters(ViewModel):
    sweep_id: str | None
    tags: dict[str, str]


class FilterOptions(ViewModel):
    """What the sweep and tag filters can choose from (ptmlab.results `filter_options`)."""

    sweeps: list[str]
    tags: dict[str, list[str]]


class NamedId(ViewModel):
    id: str
    name: str | None


class Baseline(ViewModel):
    """A run at or below its main metric's majority-class baseline."""

    baseline: float
    metric: str | None

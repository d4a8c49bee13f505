"""GET /views/studies/{id} (ptmlab.views.studies)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ptmlab.api.view_models.common import Scalar, ViewModel
from ptmlab.api.view_models.sweep import Ranking, SearchedKey, SweepRun


class Intermediate(ViewModel):
    validation: int
    value: float | None


class StudyTrial(ViewModel):
    number: int
    state: str = Field(description="running | complete | pruned | fail | withdrawn")
    params: dict[str, Scalar]
    value: float | None
    values: list[float | None] | None = Field(description="a multi-objective study's, one per objective")
    pareto: bool
    intermediate: list[Intermediate]
    steps: int
    job_id: int | None
    job_status: str | None


class StudyRecord(ViewModel):
    id: str
    name: str | None
    spec: dict[str, Any]
    status: str
    stop_reason: str | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    counts: dict[str, int] = Field(description="trials per state")
    steps_total: int


class StudyParam(SearchedKey):
    """A searched key: its search space beside the values the trials took."""

    name: str
    kind: Literal["categorical", "int", "float"]
    log: bool
    choices: list[Scalar] | None = Field(None, description="categorical only")
    low: int | float | None = Field(None, description="int and float only")
    high: int | float | None = Field(None, description="int and float only")


class StudyRun(SweepRun):
    number: int


class BestTrialRun(ViewModel):
    number: int
    job_id: int | None
    label: str | None
    score: float | None
    degenerate: bool
    baseline: float | None


class HistoryPoint(ViewModel):
    number: int
    value: float
    best: float = Field(description="the best value so far")


class StudyViewOut(Ranking):
    objectives: list[str] | None
    directions: list[str] | None
    pareto: list[int]
    study: StudyRecord
    objective: str | None
    direction: Literal["maximize", "minimize"]
    trials: list[StudyTrial]
    params: list[StudyParam]
    runs: list[StudyRun]
    best: int | None = Field(description="the best trial's number")
    best_run: BestTrialRun | None
    history: list[HistoryPoint]
    importances: dict[str, float] | None
    importances_note: str | None

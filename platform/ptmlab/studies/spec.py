"""What a study asks for (stored as `ptmlab_studies.spec`): the trials' stage and overrides, the
search space, the objective (or several: a multi-objective study), the sampler, the pruner, the
budget and how many trials run at once. One model for the API body, the CLI and the Hydra sweeper."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SAMPLERS = ("tpe", "random", "grid", "cmaes", "nsga2")
PRUNERS = ("none", "asha", "hyperband", "median")


class StudySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, max_length=200)
    stage: str = Field(max_length=100)
    # Hydra overrides as for `-m`: those with interval/choice/range are the search space.
    overrides: list[str] = Field(max_length=200)
    objective: str | None = Field(None, max_length=200,
                                  description="a metric the stage reports at each validation, e.g. val/sentiment/accuracy")
    direction: Literal["maximize", "minimize"] = "maximize"
    # A multi-objective study instead (plan.py refuses both, or lengths that differ): fields of the
    # stage's summary read when a trial's job ends, e.g. score and latency_ms of stage=compress.
    objectives: list[str] | None = Field(None, min_length=2, max_length=8,
                                         description="several summary fields, e.g. [score, size_bytes]")
    directions: list[Literal["maximize", "minimize"]] | None = Field(None, max_length=8)
    sampler: Literal["tpe", "random", "grid", "cmaes", "nsga2"] = "tpe"
    pruner: Literal["none", "asha", "hyperband", "median"] = "none"
    # The pruner's resource is the validation count (1, 2, ...): trials with different batch sizes
    # validate at different steps, but each validation is one epoch of data for all of them.
    min_resource: int = Field(1, ge=1)
    reduction_factor: int = Field(2, ge=2)
    n_trials: int = Field(16, ge=1, le=10_000)
    n_parallel: int = Field(2, ge=1, le=1000)
    max_wall_s: float | None = Field(None, gt=0)
    max_steps: int | None = Field(None, ge=1, description="total training steps over all trials")
    seed: int = 0  # the sampler's seed; every trial runs with the same job seed (`job_seed`)
    job_seed: int = 42
    queue: str = Field("default", max_length=100)
    priority: int = 0
    gpus: int = Field(0, ge=0)
    timeout_s: float | None = Field(None, gt=0)

    @property
    def multi_objective(self) -> bool:
        return self.objectives is not None

    @property
    def objective_names(self) -> list[str]:
        return list(self.objectives) if self.objectives is not None else [self.objective or ""]

    @property
    def direction_list(self) -> list[str]:
        return list(self.directions or []) if self.objectives is not None else [self.direction]


def stored_spec(data: dict[str, Any]) -> StudySpec:
    """A study's spec as stored (`ptmlab_studies.spec`, its `model_dump`) read back as its model;
    one that no longer validates (stored before a field changed) as it was stored, unchecked, so
    the studies list still shows it."""
    try:
        return StudySpec.model_validate(data)
    except ValidationError:
        return StudySpec.model_construct(**data)

"""What a study asks for (stored as `ptmlab_studies.spec`): the trials' stage and overrides, the
search space, the objective (or several: a multi-objective study), the sampler, the pruner, the
budget and how many trials run at once. One model for the API body, the CLI and the Hydra sweeper.

Every field is bounded (a refusal names it, before anything is queued): the trials' job options
take the queue's types (ptmlab.queue.jobs), and a study's work is bounded by `n_parallel` (at most
MAX_PARALLEL trials are asked and queued per driver step, creation included) and `n_trials`."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ptmlab.queue.jobs import INT4_MAX, Gpus, Name, Priority, QueueName, Seed, ShortName, TimeoutS, no_nul

SAMPLERS = ("tpe", "random", "grid", "cmaes", "nsga2")
PRUNERS = ("none", "asha", "hyperband", "median")
# Trials in flight at once. Creating a study asks and queues this many trials in the request, so
# it bounds the request's work and memory; 64 is more than the GPUs of any host ptmlab runs on.
MAX_PARALLEL = 64
MAX_TRIALS = 10_000
MAX_WALL_S = 366 * 24 * 3600.0
SAMPLER_SEED_MAX = 2**32 - 1  # numpy's (and torch's) seed range

Text = Annotated[str, Field(min_length=1, max_length=200)]
StudyOverride = Annotated[str, Field(min_length=1, max_length=2000)]


class StudySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    stage: ShortName = Field(description="a conf/stage name")
    # Hydra overrides as for `-m`: those with interval/choice/range are the search space.
    overrides: list[StudyOverride] = Field(max_length=200)
    objective: Text | None = Field(
        None, description="a metric the stage reports at each validation, e.g. val/sentiment/accuracy"
    )
    direction: Literal["maximize", "minimize"] = "maximize"
    # A multi-objective study instead (plan.py refuses both, or lengths that differ): fields of the
    # stage's summary read when a trial's job ends, e.g. score and latency_ms of stage=compress.
    objectives: list[Text] | None = Field(
        None, min_length=2, max_length=8, description="several summary fields, e.g. [score, size_bytes]"
    )
    directions: list[Literal["maximize", "minimize"]] | None = Field(None, max_length=8)
    sampler: Literal["tpe", "random", "grid", "cmaes", "nsga2"] = "tpe"
    pruner: Literal["none", "asha", "hyperband", "median"] = "none"
    # The pruner's resource is the validation count (1, 2, ...): trials with different batch sizes
    # validate at different steps, but each validation is one epoch of data for all of them.
    min_resource: int = Field(1, ge=1, le=INT4_MAX)
    reduction_factor: int = Field(2, ge=2, le=INT4_MAX)
    n_trials: int = Field(16, ge=1, le=MAX_TRIALS)
    n_parallel: int = Field(
        2,
        ge=1,
        le=MAX_PARALLEL,
        description=f"trials in flight at once (at most {MAX_PARALLEL}); the rest are asked as they end",
    )
    max_wall_s: float | None = Field(None, gt=0, le=MAX_WALL_S, allow_inf_nan=False)
    max_steps: int | None = Field(None, ge=1, le=2**53 - 1, description="total training steps over all trials")
    # the sampler's seed; every trial runs with the same job seed (`job_seed`)
    seed: int = Field(0, ge=0, le=SAMPLER_SEED_MAX)
    job_seed: Seed = 42
    # each trial's job options, bounded as every job's (ptmlab.queue.jobs)
    queue: QueueName = "default"
    priority: Priority = 0
    gpus: Gpus = 0
    timeout_s: TimeoutS | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _reject_nul(cls, value: Any) -> Any:
        return no_nul(value)

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
    the studies list still shows it and its driver goes on. A non-finite number (an Infinity
    timeout or budget, once accepted) reads as None: no limit, which is what it meant."""
    data = finite(data)
    try:
        return StudySpec.model_validate(data)
    except ValidationError:
        return StudySpec.model_construct(**data)


def finite(value: Any) -> Any:
    """The value with every non-finite float (which JSON cannot carry) as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [finite(v) for v in value]
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    return value

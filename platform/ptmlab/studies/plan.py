"""Checking a study before anything is queued: the search space parses, one point of it
composes, the objective is a metric the stage reports, a pruner has intermediate values to judge,
the sampler can take the space; a multi-objective study names each objective once, with a direction
for each, from the stage's summary, and no pruner. Each refusal is one ConfigError line (exit 2 /
HTTP 422)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optuna.distributions import BaseDistribution

from ptmlab.errors import ConfigError
from ptmlab.studies.objective import check_objective, check_summary_objectives
from ptmlab.studies.search_space import grid_of, low_point, parse_space, trial_overrides
from ptmlab.studies.spec import StudySpec, stored_spec


@dataclass
class StudyPlan:
    spec: StudySpec
    fixed: list[str]
    space: dict[str, BaseDistribution]

    @property
    def n_trials(self) -> int:
        """The trial budget; a grid has no more points than its product."""
        if self.spec.sampler != "grid":
            return self.spec.n_trials
        size = 1
        for values in grid_of(self.space).values():
            size *= len(values)
        return min(self.spec.n_trials, size)

    def overrides_for(self, params: dict[str, Any]) -> list[str]:
        return trial_overrides(self.fixed, params)


def plan_study(spec: StudySpec, compose=None) -> StudyPlan:
    """`compose(overrides) -> cfg` (default: ptmlab.config.compose_config with the stage)."""
    check_objectives_given(spec)
    fixed, space = parse_space(spec.overrides)
    if spec.sampler == "grid":
        grid_of(space)
    if compose is None:
        from ptmlab.config import compose_config

        def compose(overrides):
            return compose_config([f"stage={spec.stage}", *overrides])

    cfg = compose(trial_overrides(fixed, low_point(space)))
    if spec.multi_objective:
        check_summary_objectives(cfg, spec.objective_names, spec.pruner)
    else:
        check_objective(cfg, spec.objective, spec.pruner)
    return StudyPlan(spec, fixed, space)


def check_objectives_given(spec: StudySpec) -> None:
    """One objective (`objective`, `direction`) or several (`objectives`, `directions`), not both."""
    if spec.objectives is None:
        if spec.directions is not None:
            raise ConfigError("directions: given without objectives (a single objective takes direction)")
        if not spec.objective:
            raise ConfigError("objective: a study needs an objective (or objectives with directions)")
        return
    if spec.objective:
        raise ConfigError(
            "objective and objectives: give one or the other (objectives with directions for a multi-objective study)"
        )
    directions = spec.directions or []
    if len(directions) != len(spec.objectives):
        raise ConfigError(
            f"directions: {len(directions)} given for {len(spec.objectives)} objectives "
            f"({', '.join(spec.objectives)}); one each"
        )
    if len(set(spec.objectives)) != len(spec.objectives):
        raise ConfigError(f"objectives: {', '.join(spec.objectives)} names one twice")
    if spec.sampler == "cmaes":
        raise ConfigError("sampler=cmaes: Optuna's CMA-ES takes one objective; use nsga2, tpe or random")


def replan(spec_json: dict[str, Any]) -> StudyPlan:
    """A stored study's plan, without composing again (it composed when it was created); a spec
    stored before a bound existed reads as it was stored (stored_spec), so its study goes on."""
    spec = stored_spec(spec_json)
    fixed, space = parse_space(spec.overrides)
    return StudyPlan(spec, fixed, space)

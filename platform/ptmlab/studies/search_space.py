"""A study's search space, written as Hydra's sweep grammar: the overrides of a `-m` whose values
are `interval(a,b)` (with `tag(log,...)` for a log scale), `choice(...)` or `range(...)` become
Optuna distributions; every other override is fixed for all trials.

    fixed, space = parse_space(["task=demo/sentiment", "stage.lr=tag(log,interval(1e-5,1e-3))",
                                "stage.batch_size=choice(8,16,32)"])
    trial_overrides(fixed, {"stage.lr": 3e-4, "stage.batch_size": 16})
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from ptmlab.errors import ConfigError

MAX_CHOICES = 10_000  # values a range is listed as, points of a grid


def _parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def parse_space(overrides: Sequence[str]) -> tuple[list[str], dict[str, BaseDistribution]]:
    """(fixed overrides, {key: distribution}); ConfigError with one line on anything else."""
    from hydra.errors import HydraException

    fixed: list[str] = []
    space: dict[str, BaseDistribution] = {}
    for text in overrides:
        try:
            parsed = _parser().parse_override(text)
        except HydraException as exc:  # OverrideParseException, and the lexer's own (a tab, a stray byte)
            raise ConfigError(f"{text!r}: {str(exc).splitlines()[0]}") from None
        if not parsed.is_sweep_override():
            fixed.append(text)
            continue
        key = _prefix(text, parsed) + parsed.key_or_group
        if key in space:
            raise ConfigError(f"{text}: {key} is searched twice")
        space[key] = distribution(text, parsed.value())
    if not space:
        raise ConfigError(
            "empty search space: give at least one override with interval(a,b), choice(...) or range(...)"
        )
    return fixed, space


def _prefix(text: str, parsed) -> str:
    """`+key=` / `++key=` stay on each trial's override (the key is added, not changed)."""
    from hydra.core.override_parser.types import OverrideType

    if parsed.type == OverrideType.DEL:
        raise ConfigError(f"{text}: a deletion cannot be searched")
    return {OverrideType.ADD: "+", OverrideType.FORCE_ADD: "++"}.get(parsed.type, "")


def distribution(text: str, sweep: Any) -> BaseDistribution:
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

    log = "log" in (sweep.tags or set())
    if isinstance(sweep, IntervalSweep):
        low, high = float(sweep.start), float(sweep.end)
        if not low < high:
            raise ConfigError(
                f"{text}: interval({sweep.start:g},{sweep.end:g}) is empty: its start must be below its end"
            )
        if log and low <= 0:
            raise ConfigError(f"{text}: a log interval must start above 0")
        return FloatDistribution(low, high, log=log)
    if isinstance(sweep, RangeSweep):
        start, stop, step = sweep.start, sweep.stop, sweep.step
        if step == 0 or (stop - start) / step <= 0:
            raise ConfigError(f"{text}: range({start:g},{stop:g},{step:g}) is empty")
        count = math.ceil((stop - start) / step - 1e-9)
        if all(isinstance(v, int) for v in (start, stop, step)):
            low, high = sorted((start, start + step * (count - 1)))
            if log and low <= 0:
                raise ConfigError(f"{text}: a log range must start above 0")
            return IntDistribution(low, high, log=log, step=1 if log else abs(step))
        if count > MAX_CHOICES:
            raise ConfigError(
                f"{text}: {count:,} values; a float range takes at most {MAX_CHOICES:,} (or use interval)"
            )
        return CategoricalDistribution(
            [round(float(start + i * step), 12) for i in range(count)]
        )  # 0.1+2*0.1 reads 0.3
    if isinstance(sweep, ChoiceSweep):
        choices = list(sweep.list)
        if not choices:
            raise ConfigError(f"{text}: choice() has no values")
        if any(not isinstance(c, str | int | float | bool) for c in choices):
            raise ConfigError(f"{text}: choice values must be plain strings or numbers")
        if len(set(map(repr, choices))) != len(choices):
            raise ConfigError(f"{text}: choice values repeat")
        return CategoricalDistribution(choices)
    raise ConfigError(f"{text}: a study searches interval(a,b), choice(...) or range(...), not {type(sweep).__name__}")


def grid_of(space: dict[str, BaseDistribution]) -> dict[str, list[Any]]:
    """Every value of each parameter, for the grid sampler: continuous intervals have none."""
    grid: dict[str, list[Any]] = {}
    size = 1
    for key, dist in space.items():
        size *= (
            len(dist.choices)
            if isinstance(dist, CategoricalDistribution)
            else ((dist.high - dist.low) // dist.step + 1 if isinstance(dist, IntDistribution) else 1)
        )
        if size > MAX_CHOICES:
            raise ConfigError(f"sampler=grid: the grid has over {MAX_CHOICES:,} points; search it with tpe or random")
        if isinstance(dist, CategoricalDistribution):
            grid[key] = list(dist.choices)
        elif isinstance(dist, IntDistribution) and not dist.log:
            grid[key] = list(range(dist.low, dist.high + 1, dist.step))
        else:
            raise ConfigError(f"sampler=grid: {key} is an interval; a grid takes choice(...) or range(...)")
    return grid


def trial_overrides(fixed: Sequence[str], params: dict[str, Any]) -> list[str]:
    """The overrides of one trial: the fixed ones and a value for each searched key."""
    return [*fixed, *(f"{key}={format_value(value)}" for key, value in sorted(params.items()))]


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def low_point(space: dict[str, BaseDistribution]) -> dict[str, Any]:
    """One point of the space (each parameter's first value): composed once before anything is queued."""
    point = {}
    for key, dist in space.items():
        point[key] = dist.choices[0] if isinstance(dist, CategoricalDistribution) else dist.low
    return point

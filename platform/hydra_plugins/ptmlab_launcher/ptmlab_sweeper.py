"""`hydra/sweeper=ptmlab`: the grammar and cross product of Hydra's basic sweeper (`a=1,2 b=range(3)`,
`hydra.sweeper.params`, `max_batch_size`), built on Hydra's public sweeper API, and before launching
it composes each distinct combination once. Hydra's own sweeper composes every job of a batch,
about 0.1 s each, so `seed=range(0,1000)` spends minutes composing one config a thousand times;
combinations that differ only in `seed=` compose alike."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.core.plugins import Plugins
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from omegaconf import OmegaConf


def distinct_by_config(batch: Sequence[Sequence[str]]) -> list[Sequence[str]]:
    """The first job of each group of jobs whose overrides differ only in `seed=`."""
    from ptmlab.contracts.identity import overrides_but_seed

    seen: set[tuple[str, ...]] = set()
    distinct = []
    for overrides in batch:
        key = overrides_but_seed(overrides)
        if key not in seen:
            seen.add(key)
            distinct.append(overrides)
    return distinct


def cross_product(overrides: Sequence[Override]) -> list[list[str]]:
    """Every job's overrides: the cross product of each key's values, in the order given (a key
    given twice keeps its last value, as in Hydra's basic sweeper)."""
    values: dict[str, list[str]] = {}
    for override in overrides:
        key = override.get_key_element()
        if not override.is_sweep_override():
            values[key] = [f"{key}={override.get_value_element_as_str()}"]
        elif override.is_discrete_sweep():
            values[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:  # interval(...): only an optimising sweeper can draw from it
            raise HydraException(f"hydra/sweeper=ptmlab does not support sweep type: {override.value_type.name}")
    return [list(job) for job in itertools.product(*values.values())]


class PtmlabSweeper(Sweeper):
    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        if max_batch_size is not None and max_batch_size <= 0 and max_batch_size != -1:
            raise HydraException(f"hydra.sweeper.max_batch_size must be positive, got {max_batch_size}")
        self.max_batch_size = None if max_batch_size == -1 else max_batch_size
        self.params = dict(params or {})
        self.hydra_context = self.config = self.launcher = None

    def setup(self, *, hydra_context, task_function, config) -> None:
        self.hydra_context, self.config = hydra_context, config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        super().validate_batch_is_legal(distinct_by_config(batch))

    def sweep(self, arguments: list[str]) -> Any:
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        jobs = cross_product(parser.parse_overrides([*(f"{k}={v}" for k, v in self.params.items()), *arguments]))
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        size = self.max_batch_size or len(jobs) or 1
        returns, first_index = [], 0
        for start in range(0, len(jobs), size):
            batch = jobs[start : start + size]
            self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=first_index)
            for result in results:
                _ = result.return_value  # re-raises a job's exception, as Hydra's sweepers do
            first_index += len(batch)
            returns.append(results)
        return returns

"""`hydra/sweeper=ptmlab`: Hydra's basic sweeper (same grammar, same cross product), except that
before launching it composes each distinct combination once. Hydra's own sweeper composes every
job of a batch, about 0.1 s each, so `seed=range(0,1000)` spends minutes composing one config a
thousand times; combinations that differ only in `seed=` compose alike."""

from collections.abc import Sequence

# Private, and kept: Hydra exports only the abstract Sweeper; its basic sweeper (the grammar and
# the cross product this one reuses) has no public import path.
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper


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


class PtmlabSweeper(BasicSweeper):
    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        super().validate_batch_is_legal(distinct_by_config(batch))

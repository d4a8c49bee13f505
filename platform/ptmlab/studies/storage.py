"""Optuna on the platform database: its RDB storage on the same SQLAlchemy URL (SQLite by
default, PostgreSQL in the compose stack), and the sampler and pruner a spec names.

The storage skips creating tables and checking Optuna's schema version: migration 0004 created
Optuna's tables, and Optuna's own Alembic stamp would overwrite this database's `alembic_version`.
"""

from __future__ import annotations

import threading
from typing import Any

import optuna
from optuna.distributions import BaseDistribution

from ptmlab.db import SQLITE_BUSY_TIMEOUT_MS, get_engine, is_sqlite
from ptmlab.errors import ConfigError
from ptmlab.studies.search_space import grid_of
from ptmlab.studies.spec import StudySpec

_lock = threading.Lock()
_storages: dict[str, optuna.storages.RDBStorage] = {}

optuna.logging.set_verbosity(optuna.logging.WARNING)  # one line per trial in a worker's log is noise


def optuna_storage(url: str) -> optuna.storages.RDBStorage:
    get_engine(url)  # migrated: Optuna's tables exist
    with _lock:
        storage = _storages.get(url)
        if storage is None:
            kwargs: dict[str, Any] = (
                {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}}
                if is_sqlite(url)
                else {"pool_pre_ping": True}
            )
            storage = _storages[url] = optuna.storages.RDBStorage(
                url, engine_kwargs=kwargs, skip_compatibility_check=True, skip_table_creation=True
            )
    return storage


def forget_storages() -> None:
    """Tests switch databases; a forked child must not share pools."""
    with _lock:
        for storage in _storages.values():
            storage.engine.dispose()
        _storages.clear()


def make_sampler(spec: StudySpec, space: dict[str, BaseDistribution], asked: int) -> optuna.samplers.BaseSampler:
    # A sampler is rebuilt at each step of the driver (any worker may drive the study), so its seed
    # moves with the trials already asked: the same seed each time would propose the same point.
    seed = (spec.seed * 100_003 + asked) % 2**32  # numpy's seed range
    if spec.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(5, max(1, spec.n_trials // 3)))
    if spec.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if spec.sampler == "grid":
        return optuna.samplers.GridSampler(grid_of(space), seed=spec.seed)
    if spec.sampler == "nsga2":
        # Its generations live in the trials' system attributes, so a rebuilt sampler carries on.
        # A generation of half the trial budget (2 to 50, Optuna's default): a small study still breeds.
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(2, min(50, spec.n_trials // 2)))
    if spec.sampler == "cmaes":
        try:
            import cmaes  # noqa: F401 - only whether it is installed
        except ImportError:
            raise ConfigError("sampler=cmaes needs the `cmaes` package, which is not installed here") from None
        return optuna.samplers.CmaEsSampler(seed=seed)
    raise ConfigError(f"unknown sampler {spec.sampler!r}")


def make_pruner(spec: StudySpec) -> optuna.pruners.BasePruner:
    if spec.pruner == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=spec.min_resource, reduction_factor=spec.reduction_factor
        )
    if spec.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=spec.min_resource, reduction_factor=spec.reduction_factor)
    if spec.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=min(5, max(1, spec.n_trials // 4)))
    return optuna.pruners.NopPruner()

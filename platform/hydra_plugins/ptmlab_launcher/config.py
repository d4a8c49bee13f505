"""Config nodes: `hydra/launcher=ptmlab` (set its fields as `hydra.launcher.<field>=`) and
`hydra/sweeper=ptmlab` (Hydra's basic sweeper, composing each distinct combination once),
`hydra/sweeper=ptmlab_optuna` (a `-m` with a search space becomes a ptmlab study)."""

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore


@dataclass
class PtmlabLauncherConf:
    _target_: str = "hydra_plugins.ptmlab_launcher.ptmlab_launcher.PtmlabLauncher"
    # Where the jobs go: the platform database (default: PTMLAB_DATABASE_URL, else SQLite in
    # PTMLAB_HOME), or a running API when api_url is set (it validates and queues the sweep).
    database_url: str | None = None
    api_url: str | None = None
    api_token: str | None = None  # default: $PTMLAB_API_TOKEN
    # wait=true: block until every job has finished, printing progress; exit non-zero if any failed.
    wait: bool = False
    # skip_invalid=true: queue the combinations that compose, leave out (and list) the others.
    skip_invalid: bool = False
    poll_s: float = 2.0
    name: str | None = None
    queue: str = "default"
    priority: int = 0
    gpus: int = 0
    timeout_s: float | None = None
    max_attempts: int = 3
    tags: dict[str, str] = field(default_factory=dict)


ConfigStore.instance().store(group="hydra/launcher", name="ptmlab", node=PtmlabLauncherConf, provider="ptmlab")


@dataclass
class PtmlabSweeperConf:
    _target_: str = "hydra_plugins.ptmlab_launcher.ptmlab_sweeper.PtmlabSweeper"
    max_batch_size: int | None = None
    params: dict[str, str] | None = None


ConfigStore.instance().store(group="hydra/sweeper", name="ptmlab", node=PtmlabSweeperConf, provider="ptmlab")


@dataclass
class PtmlabOptunaSweeperConf:
    """`hydra/sweeper=ptmlab_optuna`: a `-m` with interval/choice/range becomes a ptmlab study
    (ptmlab.studies.spec.StudySpec's fields; null: the spec's default)."""

    _target_: str = "hydra_plugins.ptmlab_launcher.ptmlab_optuna_sweeper.PtmlabOptunaSweeper"
    objective: str | None = None  # required: a metric the stage reports at each validation
    direction: str | None = None  # maximize | minimize
    # a multi-objective study instead: summary fields and one direction each, e.g.
    # hydra.sweeper.objectives=[score,size_bytes] hydra.sweeper.directions=[maximize,minimize]
    objectives: list[str] | None = None
    directions: list[str] | None = None
    sampler: str | None = None  # tpe | random | grid | cmaes | nsga2
    pruner: str | None = None  # none | asha | hyperband | median
    min_resource: int | None = None
    reduction_factor: int | None = None
    n_trials: int | None = None
    n_parallel: int | None = None
    max_wall_s: float | None = None
    max_steps: int | None = None
    seed: int | None = None
    name: str | None = None
    queue: str | None = None
    priority: int | None = None
    gpus: int | None = None
    timeout_s: float | None = None
    # Where the study goes: the platform database, or a running API when api_url is set.
    database_url: str | None = None
    api_url: str | None = None
    api_token: str | None = None


ConfigStore.instance().store(
    group="hydra/sweeper", name="ptmlab_optuna", node=PtmlabOptunaSweeperConf, provider="ptmlab"
)

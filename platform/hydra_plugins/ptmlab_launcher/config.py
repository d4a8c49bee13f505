"""Config nodes: `hydra/launcher=ptmlab` (set its fields as `hydra.launcher.<field>=`) and
`hydra/sweeper=ptmlab` (Hydra's basic sweeper, composing each distinct combination once),
`hydra/sweeper=ptmlab_optuna` (a `-m` with a search space becomes a ptmlab study)."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class PtmlabLauncherConf:
    _target_: str = "hydra_plugins.ptmlab_launcher.ptmlab_launcher.PtmlabLauncher"
    # Where the jobs go: the platform database (default: PTMLAB_DATABASE_URL, else SQLite in
    # PTMLAB_HOME), or a running API when api_url is set (it validates and queues the sweep).
    database_url: Optional[str] = None
    api_url: Optional[str] = None
    api_token: Optional[str] = None  # default: $PTMLAB_API_TOKEN
    # wait=true: block until every job has finished, printing progress; exit non-zero if any failed.
    wait: bool = False
    # skip_invalid=true: queue the combinations that compose, leave out (and list) the others.
    skip_invalid: bool = False
    poll_s: float = 2.0
    name: Optional[str] = None
    queue: str = "default"
    priority: int = 0
    gpus: int = 0
    timeout_s: Optional[float] = None
    max_attempts: int = 3
    tags: Dict[str, str] = field(default_factory=dict)


ConfigStore.instance().store(group="hydra/launcher", name="ptmlab", node=PtmlabLauncherConf, provider="ptmlab")


@dataclass
class PtmlabSweeperConf:
    _target_: str = "hydra_plugins.ptmlab_launcher.ptmlab_sweeper.PtmlabSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(group="hydra/sweeper", name="ptmlab", node=PtmlabSweeperConf, provider="ptmlab")


@dataclass
class PtmlabOptunaSweeperConf:
    """`hydra/sweeper=ptmlab_optuna`: a `-m` with interval/choice/range becomes a ptmlab study
    (ptmlab.studies.spec.StudySpec's fields; null: the spec's default)."""

    _target_: str = "hydra_plugins.ptmlab_launcher.ptmlab_optuna_sweeper.PtmlabOptunaSweeper"
    objective: Optional[str] = None  # required: a metric the stage reports at each validation
    direction: Optional[str] = None  # maximize | minimize
    # a multi-objective study instead: summary fields and one direction each, e.g.
    # hydra.sweeper.objectives=[score,size_bytes] hydra.sweeper.directions=[maximize,minimize]
    objectives: Optional[List[str]] = None
    directions: Optional[List[str]] = None
    sampler: Optional[str] = None  # tpe | random | grid | cmaes | nsga2
    pruner: Optional[str] = None  # none | asha | hyperband | median
    min_resource: Optional[int] = None
    reduction_factor: Optional[int] = None
    n_trials: Optional[int] = None
    n_parallel: Optional[int] = None
    max_wall_s: Optional[float] = None
    max_steps: Optional[int] = None
    seed: Optional[int] = None
    name: Optional[str] = None
    queue: Optional[str] = None
    priority: Optional[int] = None
    gpus: Optional[int] = None
    timeout_s: Optional[float] = None
    # Where the study goes: the platform database, or a running API when api_url is set.
    database_url: Optional[str] = None
    api_url: Optional[str] = None
    api_token: Optional[str] = None


ConfigStore.instance().store(group="hydra/sweeper", name="ptmlab_optuna", node=PtmlabOptunaSweeperConf,
                             provider="ptmlab")

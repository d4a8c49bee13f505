"""Config nodes: `hydra/launcher=ptmlab` (set its fields as `hydra.launcher.<field>=`) and
`hydra/sweeper=ptmlab` (Hydra's basic sweeper, composing each distinct combination once)."""

from dataclasses import dataclass, field
from typing import Dict, Optional

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

"""`hydra/sweeper=ptmlab_optuna`: a `-m` whose overrides use `interval(a,b)` (`tag(log,...)` for a
log scale), `choice(...)` or `range(...)` becomes one ptmlab study (ptmlab.studies): Optuna asks,
each trial is a queued job, workers prune from live progress. The sweeper creates the study and
returns; `ptmlab study status <id>` follows it. Unlike Hydra's own Optuna sweeper it never blocks
per batch and it prunes (hydra#1710, #1954).

    python -m ptmlab.run -m hydra/sweeper=ptmlab_optuna hydra.sweeper.objective=val/sentiment/accuracy \\
        hydra.sweeper.pruner=asha stage=finetune task=demo/sentiment \\
        'stage.lr=tag(log,interval(1e-4,1e-2))' 'stage.batch_size=choice(8,16,32)'
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

SPEC_FIELDS = (
    "name",
    "objective",
    "direction",
    "objectives",
    "directions",
    "sampler",
    "pruner",
    "min_resource",
    "reduction_factor",
    "n_trials",
    "n_parallel",
    "max_wall_s",
    "max_steps",
    "seed",
    "queue",
    "priority",
    "gpus",
    "timeout_s",
)


def split_stage(arguments: Sequence[str], default: str) -> tuple[str, list[str]]:
    """(the trials' stage, the other overrides): `stage=` is the study's, not a trial override."""
    stage, rest = default, []
    for argument in arguments:
        if argument.startswith("stage="):
            stage = argument.split("=", 1)[1]
        else:
            rest.append(argument)
    return stage, rest


class PtmlabOptunaSweeper(Sweeper):
    def __init__(self, **options: Any) -> None:
        self.options = options
        self.config: DictConfig | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config

    def sweep(self, arguments: list[str]) -> Any:
        from ptmlab.errors import PtmlabError

        assert self.config is not None
        stage, overrides = split_stage(arguments, str(OmegaConf.select(self.config, "stage.name", default="")))
        try:
            study_id, queued = self._create(stage, overrides)
        except PtmlabError as exc:
            # A user's error is one line and exit status 2, like the launcher and the CLI.
            print(f"error[{exc.code}]: {exc}", file=sys.stderr, flush=True)
            sys.exit(2)
        print(f"[ptmlab] study {study_id}: {queued} trial(s) queued; `ptmlab study status {study_id}`", flush=True)
        return []

    def _spec(self, stage: str, overrides: list[str]):
        from pydantic import ValidationError

        from ptmlab.errors import ConfigError
        from ptmlab.studies import StudySpec

        fields = {k: self.options[k] for k in SPEC_FIELDS if self.options.get(k) is not None}
        fields = {k: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v for k, v in fields.items()}
        try:
            return StudySpec(stage=stage, overrides=overrides, **fields)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ConfigError(f"hydra.sweeper.{'.'.join(map(str, first['loc']))}: {first['msg']}") from None

    def _create(self, stage: str, overrides: list[str]) -> tuple[str, int]:
        spec = self._spec(stage, overrides)
        if self.options.get("api_url"):
            return self._create_via_api(spec)
        from ptmlab import studies
        from ptmlab.db import default_url, get_sessionmaker

        url = self.options.get("database_url") or default_url()
        plan = studies.plan_study(spec)
        with get_sessionmaker(url)() as session:
            study = studies.create_study(session, plan, url=url, driver_id="hydra")
            return study.id, len(studies.study_status(session, study.id, url=url)["trials"])

    def _create_via_api(self, spec) -> tuple[str, int]:
        import httpx

        from ptmlab.errors import ConfigError
        from ptmlab.settings import get_settings

        token = self.options.get("api_token") or get_settings().api_token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        r = httpx.post(
            f"{str(self.options['api_url']).rstrip('/')}/api/v1/studies",
            json=spec.model_dump(),
            headers=headers,
            timeout=120,
        )
        if r.status_code != 201:
            try:
                message = r.json()["error"]["message"]
            except Exception:
                message = r.text[:500]
            raise ConfigError(f"the API refused the study ({r.status_code}): {message}")
        body = r.json()
        return body["id"], len(body["trials"])

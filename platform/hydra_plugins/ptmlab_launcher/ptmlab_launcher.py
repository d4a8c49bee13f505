"""The `ptmlab` Hydra launcher: instead of running each combination of a multirun, it composes
each one (so a bad combination fails the whole sweep before anything is queued, naming it),
queues all of them as ONE sweep, and returns; `hydra.launcher.wait=true` blocks until every job
has finished, printing progress, and exits non-zero when one failed.

Jobs go straight into the platform database through `ptmlab.queue` (PTMLAB_DATABASE_URL or
`hydra.launcher.database_url`), or to a running API when `hydra.launcher.api_url` is set (the API
validates them again, with its remote-caller restrictions).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from ptmlab.settings import get_settings

log = logging.getLogger(__name__)


class PtmlabLauncher(Launcher):
    def __init__(
        self,
        *,
        database_url: str | None = None,
        api_url: str | None = None,
        api_token: str | None = None,
        wait: bool = False,
        poll_s: float = 2.0,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        gpus: int = 0,
        timeout_s: float | None = None,
        max_attempts: int = 3,
        tags: Any = None,
        skip_invalid: bool = False,
    ) -> None:
        self.database_url = database_url
        self.api_url = api_url.rstrip("/") if api_url else None
        self.api_token = api_token or get_settings().api_token or None
        self.wait = wait
        self.skip_invalid = skip_invalid
        self.poll_s = poll_s
        self.name = name
        self.job_options = {
            "queue": queue,
            "priority": priority,
            "gpus": gpus,
            "timeout_s": timeout_s,
            "max_attempts": max_attempts,
            "tags": OmegaConf.to_container(tags) if isinstance(tags, DictConfig) else dict(tags or {}),
        }
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context

    # -- launch ---------------------------------------------------------------------------------
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from ptmlab.errors import PtmlabError

        assert self.config is not None and self.hydra_context is not None
        try:
            combos = self._validate([list(o) for o in job_overrides])
            if self.api_url:
                sweep_id, job_ids = self._submit_via_api(combos)
                where = self.api_url
            else:
                sweep_id, job_ids = self._submit_to_database(combos)
                where = "the platform database"
            print(
                f"[ptmlab] sweep {sweep_id}: {len(job_ids)} jobs queued in {where} (jobs {job_ids[0]}..{job_ids[-1]})",
                flush=True,
            )
            for idx, (job_id, combo) in enumerate(zip(job_ids, combos), start=initial_job_idx):
                print(f"[ptmlab]   #{idx} job {job_id}: {' '.join(filter_overrides(combo))}", flush=True)
            sweeper = str(OmegaConf.select(self.config, "hydra.sweeper._target_", default=""))
            if sweeper.endswith(".BasicSweeper") and len(combos) >= 50:
                print(
                    "[ptmlab] tip: with hydra/sweeper=ptmlab a large sweep is queued faster (Hydra's basic "
                    "sweeper composes every job; that one composes each distinct config once)",
                    flush=True,
                )
            states = self._wait(sweep_id, job_ids) if self.wait else {j: "queued" for j in job_ids}
        except PtmlabError as exc:
            # A user's error is one line and exit status 2, like `python -m ptmlab.run` (not a traceback).
            print(f"error[{exc.code}]: {exc}", file=sys.stderr, flush=True)
            sys.exit(2)
        failed = [(j, c) for j, c in zip(job_ids, combos) if states[j] != "succeeded"]
        if self.wait and failed:
            for job_id, combo in failed:
                print(
                    f"error[job_failed]: sweep {sweep_id}: job {job_id} [{' '.join(combo)}] ended "
                    f"{states[job_id]} (ptmlab logs {job_id})",
                    file=sys.stderr,
                    flush=True,
                )
            sys.exit(1)
        return [self._job_return(combo, job_id, states[job_id], sweep_id) for combo, job_id in zip(combos, job_ids)]

    def _validate(self, combos: list[list[str]]) -> list[list[str]]:
        """Compose every combination the way Hydra's own launchers do, then ptmlab's compatibility
        checks; returns the combinations to queue. One that does not compose refuses the whole
        sweep, naming it, or with skip_invalid=true is left out with a note (a model × objective grid
        where some pairs are impossible). Combinations that differ only in `seed=` compose once."""
        from hydra.errors import HydraException
        from omegaconf.errors import OmegaConfBaseException

        from ptmlab.config import _one_line, check_config
        from ptmlab.contracts.identity import overrides_but_seed
        from ptmlab.errors import ConfigError
        from ptmlab.recipes import apply_recipe

        verdicts: dict[tuple[str, ...], str | None] = {}
        valid: list[list[str]] = []
        for combo in combos:
            key = overrides_but_seed(combo)
            if key not in verdicts:
                try:
                    cfg = self.hydra_context.config_loader.load_sweep_config(self.config, combo)
                    with open_dict(cfg):
                        del cfg["hydra"]
                    check_config(apply_recipe(cfg, combo))
                    verdicts[key] = None
                except (HydraException, OmegaConfBaseException, ValueError) as exc:
                    verdicts[key] = _one_line(exc)
                except ConfigError as exc:
                    verdicts[key] = str(exc)
                if verdicts[key] and self.skip_invalid:
                    print(f"[ptmlab] skipping [{' '.join(key)}]: {verdicts[key]}", flush=True)
            if verdicts[key] is None:
                valid.append(combo)
            elif not self.skip_invalid:
                raise ConfigError(
                    f"combination [{' '.join(combo)}]: {verdicts[key]} "
                    "(hydra.launcher.skip_invalid=true queues the other combinations)"
                )
        if not valid:
            raise ConfigError("no combination of the sweep composes; nothing was queued")
        return valid

    def _spec(self, combos: list[list[str]]) -> dict:
        task_overrides = list(self.config.hydra.overrides.task)
        return {"overrides": task_overrides, "launcher": "hydra", **self.job_options}

    def _submit_to_database(self, combos: list[list[str]]) -> tuple[str, list[int]]:
        from ptmlab import queue
        from ptmlab.db import get_sessionmaker

        # Hydra's logging config shows INFO records: keep Alembic's first-run migration notes quiet.
        logging.getLogger("alembic").setLevel(logging.WARNING)
        with get_sessionmaker(self.database_url)() as session:
            sweep, jobs = queue.submit_sweep(
                session, [{**self.job_options, "overrides": c} for c in combos], name=self.name, spec=self._spec(combos)
            )
            return sweep.id, [j.id for j in jobs]

    # -- the API --------------------------------------------------------------------------------
    def _request(self, method: str, path: str, **kwargs) -> dict:
        import httpx

        from ptmlab.errors import ConfigError, PtmlabError

        headers = {"Authorization": f"Bearer {self.api_token}"} if self.api_token else {}
        try:
            response = httpx.request(method, f"{self.api_url}{path}", headers=headers, timeout=120, **kwargs)
        except httpx.HTTPError as exc:
            raise PtmlabError(f"the API at {self.api_url} did not answer: {exc}") from None
        if response.status_code >= 400:
            try:
                error = response.json()["error"]
                message = f"{error['message']} ({error['code']})"
            except (ValueError, KeyError, TypeError):
                message = response.text[:500]
            cls = ConfigError if response.status_code == 422 else PtmlabError
            raise cls(f"the API refused {method} {path} with {response.status_code}: {message}")
        return response.json()

    def _submit_via_api(self, combos: list[list[str]]) -> tuple[str, list[int]]:
        body = {
            "jobs": combos,
            **({"name": self.name} if self.name else {}),
            **{k: v for k, v in self.job_options.items() if v is not None},
        }
        answer = self._request("POST", "/api/v1/sweeps", json=body)
        return answer["id"], list(answer["job_ids"])

    # -- waiting ---------------------------------------------------------------------------------
    def _jobs(self, sweep_id: str, job_ids: list[int]) -> dict[int, dict]:
        """The sweep's jobs as the API lists them (status and progress included)."""
        if self.api_url:
            jobs: dict[int, dict] = {}
            offset = 0
            while True:
                page = self._request(
                    "GET", "/api/v1/jobs", params={"sweep_id": sweep_id, "limit": 1000, "offset": offset}
                )
                jobs.update({j["id"]: j for j in page["jobs"]})
                offset += len(page["jobs"])
                if not page["jobs"] or offset >= page["total"]:
                    return jobs
        from ptmlab import queue
        from ptmlab.db import get_sessionmaker

        with get_sessionmaker(self.database_url)() as session:
            jobs, _ = queue.list_jobs(session, sweep_id=sweep_id, limit=len(job_ids))
            return {j.id: j.to_dict() for j in jobs}

    def _wait(self, sweep_id: str, job_ids: list[int]) -> dict[int, str]:
        """A line per running job (bar, step/total, loss, ETA) and the sweep's counts, until all ended."""
        from ptmlab.cli.progress_bars import ProgressBoard
        from ptmlab.db import RUNNING, TERMINAL_STATES

        board, last = ProgressBoard(tty=False), None  # interleaved with the count lines: never redrawn
        while True:
            jobs = self._jobs(sweep_id, job_ids)
            states = {i: j["status"] for i, j in jobs.items()}
            counts: dict[str, int] = {}
            for status in states.values():
                counts[status] = counts.get(status, 0) + 1
            done = sum(n for s, n in counts.items() if s in TERMINAL_STATES)
            board.draw([j for j in jobs.values() if j["status"] == RUNNING][:20])
            line = f"{done}/{len(job_ids)} finished: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
            if line != last:
                print(f"[ptmlab] [{time.strftime('%H:%M:%S')}] sweep {sweep_id}: {line}", flush=True)
                last = line
            if done == len(job_ids):
                return states
            time.sleep(self.poll_s)

    def _job_return(self, combo: list[str], job_id: int, status: str, sweep_id: str) -> JobReturn:
        from ptmlab.errors import JobFailedError

        ret = JobReturn(overrides=combo, task_name=str(self.config.hydra.job.name))
        if self.wait and status != "succeeded":
            ret.status = JobStatus.FAILED
            ret.return_value = JobFailedError(
                f"sweep {sweep_id}: job {job_id} [{' '.join(combo)}] ended {status} (ptmlab logs {job_id})"
            )
        else:
            ret.status = JobStatus.COMPLETED
            ret.return_value = {"job_id": job_id, "sweep_id": sweep_id, "status": status}
        return ret

"""A job's page extras: its resolved config (what the stage wrote to its run folder once it ran,
else the config its overrides compose to now; Hydra's compose API, torch-free) and how fast its
training ran (a result's `throughput`)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ptmlab.contracts.secrets import redact_tree
from ptmlab.contracts.summaries import Throughput
from ptmlab.db.models import Job
from ptmlab.errors import PtmlabError
from ptmlab.settings import redact, secret_literals
from ptmlab.views.compare import resolved_config


def resolved_job_config(job: Job) -> tuple[dict[str, Any] | None, str]:
    """(config, where it came from), its secrets masked (Hydra's own copy in the run folder and a
    config composed from the overrides hold them); (None, why) when it cannot be had."""
    config, source = _resolved_job_config(job)
    return (None if config is None else redact_tree(config, secret_literals())), redact(source) or ""


def _resolved_job_config(job: Job) -> tuple[dict[str, Any] | None, str]:
    cfg = resolved_config(job.run_dir)
    if cfg is not None:
        return cfg, "run folder"
    from omegaconf import OmegaConf

    from ptmlab.api.validation import _compose_lock  # Hydra's global state: one compose at a time
    from ptmlab.config import compose_config

    overrides = [
        f"stage={job.stage}",
        f"seed={job.seed}",
        *[o for o in job.overrides or [] if "=job:" not in o],
    ]  # parents resolve at claim time
    try:
        with _compose_lock:
            composed = compose_config(overrides)
    except PtmlabError as exc:
        return None, f"does not compose: {exc}"
    try:
        config = OmegaConf.to_container(composed, resolve=True)
    except Exception:
        config = OmegaConf.to_container(composed, resolve=False)
    return _backbone_groups_pending(config, job), "composed from the overrides (not yet run)"


# The groups a referenced backbone replaces when the job runs (lightning_modules/artifacts/backbone_reference.py
# `record_backbone`): before that, their defaults must not read as what will run.
BACKBONE_GROUPS = ("model", "objective", "tokenizer", "data")


def _backbone_groups_pending(config: dict[str, Any], job: Job) -> dict[str, Any]:
    ref = next((o.split("=", 1)[1] for o in job.overrides or [] if o.lstrip("+~").startswith("backbone=")), None)
    if ref is None or ref in ("null", "random") or job.stage not in ("finetune", "multitask", "probe"):
        return config
    pending = f"from backbone={ref} (recorded when the job runs)"
    return {**config, **{group: {"name": pending} for group in BACKBONE_GROUPS if group in config}}


def training_speed(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """A result's throughput figures (tokens/s, samples/s, MFU, data wait, padding), or None when
    its stage recorded none (or a malformed one: the page shows the rest of the job regardless)."""
    raw = (summary or {}).get("throughput")
    if not isinstance(raw, dict):
        return None
    try:
        return Throughput.model_validate(raw).model_dump()
    except ValidationError:
        return None

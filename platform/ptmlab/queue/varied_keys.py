"""The config keys a job's sweep or study varies: the worker hands them to the job
(PTMLAB_SWEPT_KEYS), whose recipe then names those values' origin `sweep` rather than `override`
(ptmlab.recipes)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session

from ptmlab.db.models import Job, Study, Sweep


def varied_keys(session: Session, job: Job) -> list[str]:
    spec: dict[str, Any] = {}
    if job.sweep_id and (sweep := session.get(Sweep, job.sweep_id)) is not None:
        spec = dict(sweep.spec or {})
    elif job.study_id and (study := session.get(Study, job.study_id)) is not None:
        spec = dict(study.spec or {})
    if spec.get("jobs"):
        return keys_that_differ(spec["jobs"])
    return sorted({key for text in spec.get("overrides") or [] if (key := _swept_key(str(text)))})


def keys_that_differ(jobs: Sequence[Sequence[str]]) -> list[str]:
    """A sweep given as explicit job lists: the keys not set to the same value in every job."""
    per_job = [dict(_key_value(str(text)) for text in overrides) for overrides in jobs]
    keys = set().union(*per_job) if per_job else set()
    return sorted(key for key in keys if len({job.get(key) for job in per_job}) > 1)


def _key_value(text: str) -> tuple[str, str]:
    key, _, value = text.partition("=")
    return key.lstrip("+~"), value


@lru_cache(maxsize=1024)
def _swept_key(text: str) -> str | None:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        (parsed,) = OverridesParser.create().parse_overrides([text])
    except HydraException:
        return None
    return parsed.key_or_group if parsed.is_sweep_override() else None

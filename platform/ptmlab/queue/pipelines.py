"""Pipelines: a `conf/pipeline/<name>.yaml` graph of jobs, expanded and queued as one unit.

Format:

    name: objectives_glue               # optional, default: the file name
    description: pretrain each objective, then fine-tune it on two GLUE tasks
    vars:                               # lists; a job is expanded over the vars it mentions
      objective: [mlm, clm]
      task: [glue/sst2, glue/rte]
    defaults:                           # optional, for every job (a job's own keys win)
      queue: default
      overrides: [trainer.max_steps=300]
    jobs:
      - name: pretrain-{objective}      # unique after expansion; `{var}` placeholders
        stage: pretrain
        overrides: [model=bert_tiny, "objective={objective}"]
      - name: finetune-{objective}-{task}
        stage: finetune
        overrides: ["task={task}", "backbone=job:pretrain-{objective}"]
        depends_on: []                  # optional: more parents by name; a `job:` value already is one
        gpus: 0                         # also: priority, queue, seed, timeout_s, max_attempts, tags
                                        # (bounded as every job's: ptmlab.queue.jobs.JobOptionValues)

A `{var}` placeholder is replaced only for names declared under `vars` (Hydra's `${...}`
interpolations pass through untouched). A value `job:<name>` makes that job a parent; at claim
time it becomes the parent's run folder (ptmlab.queue.claim). `job:best:<a>|<b>` makes every
listed job a parent and becomes the run folder of the one whose result scored highest
(`source=job:best:finetune-mlm|finetune-clm`: compress whichever fine-tune won). Overrides given at submission are
appended to every job. Jobs must be listed after the jobs they reference, so a graph is
acyclic by construction.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError
from sqlalchemy.orm import Session

from ptmlab.db.models import Job, Pipeline
from ptmlab.errors import ConfigError, LimitExceededError
from ptmlab.queue.jobs import (
    JobOptionValues,
    Name,
    Tags,
    _add_job,
    rewrite_value_refs,
    split_override,
    validation_message,
    value_refs,
)

JOB_KEYS = {
    "name",
    "stage",
    "overrides",
    "depends_on",
    "gpus",
    "nodes",
    "priority",
    "queue",
    "seed",
    "timeout_s",
    "max_attempts",
    "tags",
}
TOP_KEYS = {"name", "description", "vars", "defaults", "jobs"}
MAX_PIPELINE_JOBS = 10_000
PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")


class PipelineJobOptions(JobOptionValues):
    """A pipeline job's options after expansion (a `{var}` is text until then: "1" reads as 1)."""

    model_config = ConfigDict(extra="forbid")

    tags: Tags = {}


_PIPELINE_NAME = TypeAdapter(Name)


def _check_options(options: dict[str, Any], name: str, at: str) -> None:
    """ConfigError naming the first option (or the name) out of bounds; submit_job converts them
    (a `{var}` is text: "1" is the seed 1)."""
    try:
        PipelineJobOptions.model_validate({**options, "name": name})
    except ValidationError as exc:
        raise ConfigError(f"{at}: {validation_message(exc)}") from None


@dataclass
class PipelineJob:
    name: str
    stage: str | None
    overrides: list[str]
    depends_on: list[str] = field(default_factory=list)  # names within the pipeline
    options: dict[str, Any] = field(default_factory=dict)  # gpus, priority, queue, seed, ...


def pipelines_dir() -> Path:
    from ptmlab.config import CONF_DIR

    return CONF_DIR / "pipeline"


def list_pipelines() -> list[str]:
    folder = pipelines_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def load_pipeline(name_or_path: str | Path) -> dict[str, Any]:
    """The raw spec of conf/pipeline/<name>.yaml (or of a path to a yaml file)."""
    import yaml

    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = pipelines_dir() / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"pipeline {name_or_path!r} not found (looked for {path}; "
            f"available: {', '.join(list_pipelines()) or 'none'})"
        )
    try:
        spec = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(spec, dict):
        raise ConfigError(f"{path}: a pipeline is a mapping with a `jobs:` list")
    spec.setdefault("name", path.stem)
    return spec


def _substitute(value: Any, binding: dict[str, str]) -> Any:
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: binding.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [_substitute(v, binding) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, binding) for k, v in value.items()}
    return value


def _mentioned(value: Any, names: set[str]) -> set[str]:
    if isinstance(value, str):
        return {m for m in PLACEHOLDER.findall(value) if m in names}
    if isinstance(value, list):
        return set().union(*(_mentioned(v, names) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_mentioned(v, names) for v in value.values())) if value else set()
    return set()


def expand_pipeline(spec_or_name: dict[str, Any] | str | Path, overrides: Sequence[str] = ()) -> list[PipelineJob]:
    """The pipeline's jobs in submission order (parents first), placeholders expanded."""
    spec = spec_or_name if isinstance(spec_or_name, dict) else load_pipeline(spec_or_name)
    if "name" in spec:
        try:
            _PIPELINE_NAME.validate_python(spec["name"])
        except ValidationError as exc:
            raise ConfigError(f"pipeline {validation_message(exc).replace('value:', 'name:', 1)}") from None
    where = f"pipeline {spec.get('name', '?')}"
    unknown = set(spec) - TOP_KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))} (allowed: {', '.join(sorted(TOP_KEYS))})"
        )
    variables = spec.get("vars") or {}
    if not isinstance(variables, dict):
        raise ConfigError(f"{where}: vars must map names to lists")
    variables = {str(k): [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in variables.items()}
    for k, v in variables.items():
        if not v:
            raise ConfigError(f"{where}: vars.{k} is empty")
    defaults = dict(spec.get("defaults") or {})
    bad = set(defaults) - (JOB_KEYS - {"name", "depends_on"})
    if bad:
        raise ConfigError(f"{where}: unknown defaults key(s) {', '.join(sorted(bad))}")
    templates = spec.get("jobs")
    if not isinstance(templates, list) or not templates:
        raise ConfigError(f"{where}: `jobs:` must be a non-empty list")

    # Count before expanding: vars multiply, and a few long lists could name billions of jobs.
    count = 0
    for template in templates:
        size = 1
        for v in _mentioned(template, set(variables)):
            size *= len(variables[v])
        count += size
        if count > MAX_PIPELINE_JOBS:
            raise LimitExceededError(f"{where}: expands to at least {count:,} jobs; at most {MAX_PIPELINE_JOBS:,}")

    out: list[PipelineJob] = []
    names: set[str] = set()
    for i, template in enumerate(templates):
        at = f"{where} jobs[{i}]"
        if not isinstance(template, dict) or "name" not in template:
            raise ConfigError(f"{at}: each job is a mapping with a `name`")
        unknown = set(template) - JOB_KEYS
        if unknown:
            raise ConfigError(
                f"{at} ({template['name']}): unknown key(s) {', '.join(sorted(unknown))} "
                f"(allowed: {', '.join(sorted(JOB_KEYS))})"
            )
        used = sorted(_mentioned(template, set(variables)))
        for combo in itertools.product(*(variables[v] for v in used)):
            binding = dict(zip(used, combo, strict=True))
            job = _substitute(template, binding)
            name = str(job["name"])
            if name in names:
                raise ConfigError(f"{at}: job name {name!r} appears twice after expansion")
            job_overrides = [*(defaults.get("overrides") or []), *(job.get("overrides") or []), *overrides]
            job_overrides = [_substitute(str(o), binding) for o in job_overrides]
            parents = [str(p) for p in job.get("depends_on") or []]
            for o in job_overrides:
                kv = split_override(o)
                if kv:
                    parents.extend(value_refs(kv[1]))
            for p in parents:
                if p not in names:
                    raise ConfigError(
                        f"{at} ({name}): references job {p!r}, which is not an earlier job of the pipeline"
                    )
            options = {
                k: v for k, v in {**defaults, **job}.items() if k not in ("name", "stage", "overrides", "depends_on")
            }
            _check_options(options, name, at)
            out.append(
                PipelineJob(
                    name=name,
                    stage=job.get("stage", defaults.get("stage")),
                    overrides=job_overrides,
                    depends_on=list(dict.fromkeys(parents)),
                    options=options,
                )
            )
            names.add(name)
    return out


def submit_pipeline(
    session: Session,
    pipeline: dict[str, Any] | str | Path,
    *,
    overrides: Sequence[str] = (),
    tags: dict[str, Any] | None = None,
    submitted_remotely: bool = False,
) -> tuple[Pipeline, list[Job]]:
    """Expand and queue a pipeline in one transaction; `job:<name>` becomes `job:<id>`."""
    spec = pipeline if isinstance(pipeline, dict) else load_pipeline(pipeline)
    expanded = expand_pipeline(spec, overrides)
    row = Pipeline(name=str(spec.get("name") or "pipeline"), spec={"source": spec, "overrides": list(overrides)})
    session.add(row)
    session.flush()
    ids: dict[str, int] = {}
    jobs = []
    for pj in expanded:
        job_overrides = []
        for o in pj.overrides:
            kv = split_override(o)
            if kv and value_refs(kv[1]):
                o = f"{o.split('=', 1)[0]}={rewrite_value_refs(kv[1], ids)}"
            job_overrides.append(o)
        job_tags = {**(tags or {}), **dict(pj.options.get("tags") or {}), "pipeline": row.name}
        job = _add_job(
            session,
            {
                **{k: v for k, v in pj.options.items() if k != "tags"},
                "name": pj.name,
                "stage": pj.stage,
                "overrides": job_overrides,
                "depends_on": [ids[p] for p in pj.depends_on],
                "tags": job_tags,
                "pipeline_id": row.id,
                "submitted_remotely": submitted_remotely,
            },
        )
        ids[pj.name] = job.id
        jobs.append(job)
    session.commit()
    return row, jobs

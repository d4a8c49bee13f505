"""Probe drift: what fine-tuning and compression did to what a model's layers encode. Pick a
source model job (a pretrain or a fine-tune); its descendants through the lineage (the jobs that
depend on it, and theirs: fine-tunes, compressed models) that were probed give one per-layer
curve each for a probe task, overlaid on the source's, with the difference to the source per
layer. No tracker can draw this: it needs the job graph and the probe results together."""

from __future__ import annotations

from collections import deque
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ptmlab.contracts.summaries import ProbeSummary, read_stored_summary
from ptmlab.db.models import SUCCEEDED, Job, JobDependency, Result
from ptmlab.errors import NotFoundError
from ptmlab.views.probing import _task_entries  # one reading of a probe summary, shared with the probing page

MODEL_STAGES = ("pretrain", "finetune", "multitask", "compress")


def _children(session: Session, job_ids: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    rows = session.execute(
        sa.select(JobDependency.parent_id, JobDependency.job_id).where(JobDependency.parent_id.in_(job_ids))
    ).all()
    for parent, child in rows:
        out.setdefault(parent, []).append(child)
    return out


def _curves_of_probes(session: Session, probe_jobs: list[Job]) -> dict[int, dict[str, dict[int, dict]]]:
    """probe job id -> {task: {layer: values}} from its latest result (random-init curves aside)."""
    out: dict[int, dict[str, dict[int, dict]]] = {}
    for job in probe_jobs:
        summary = session.scalar(
            sa.select(Result.summary).where(Result.job_id == job.id).order_by(Result.id.desc()).limit(1)
        )
        probe = read_stored_summary(summary)
        if not isinstance(probe, ProbeSummary):
            continue
        model = probe.model or "-"
        out[job.id] = {task: layers for label, task, layers, _ in _task_entries(probe) if label == model}
    return out


def lineage_models(session: Session, source_id: int) -> list[tuple[Job, int]]:
    """The source and every model job descending from it, with its distance from the source."""
    seen, order, queue = {source_id}, [], deque([(source_id, 0)])
    while queue:
        job_id, depth = queue.popleft()
        job = session.get(Job, job_id)
        if job is None:
            continue
        if job.stage in MODEL_STAGES:
            order.append((job, depth))
        for child in _children(session, [job_id]).get(job_id, []):
            if child not in seen:
                seen.add(child)
                queue.append((child, depth + 1))
    return order


def drift_view(
    session: Session, source_id: int, probe_task: str | None = None, metric: str = "accuracy"
) -> dict[str, Any]:
    source = session.get(Job, source_id)
    if source is None or source.stage not in MODEL_STAGES:
        raise NotFoundError(f"job {source_id} is not a model job (one of {', '.join(MODEL_STAGES)})")
    models = lineage_models(session, source_id)
    children = _children(session, [job.id for job, _ in models])
    probes_of: dict[int, list[Job]] = {}
    for job, _ in models:
        kids = [session.get(Job, c) for c in children.get(job.id, [])]
        probes_of[job.id] = [k for k in kids if k is not None and k.stage == "probe" and k.status == SUCCEEDED]
    curves_by_probe = _curves_of_probes(session, [p for ps in probes_of.values() for p in ps])
    tasks = sorted({t for c in curves_by_probe.values() for t in c})
    task = probe_task or (tasks[0] if tasks else None)
    curves = []
    for job, depth in models:
        for probe in probes_of[job.id]:
            layers = curves_by_probe.get(probe.id, {}).get(task or "", {})
            points = sorted((layer, values[metric]) for layer, values in layers.items() if metric in values)
            if points:
                curves.append(
                    {
                        "job_id": job.id,
                        "name": job.name or f"job {job.id}",
                        "stage": job.stage,
                        "depth": depth,
                        "probe_job_id": probe.id,
                        "layers": [layer for layer, _ in points],
                        "values": [v for _, v in points],
                    }
                )
    reference = next((c for c in curves if c["job_id"] == source_id), None)
    for c in curves:
        if reference is None:
            c["diff"] = None
            continue
        base = dict(zip(reference["layers"], reference["values"], strict=True))
        c["diff"] = [
            None if layer not in base else value - base[layer]
            for layer, value in zip(c["layers"], c["values"], strict=True)
        ]
    return {
        "source": {"job_id": source.id, "name": source.name, "stage": source.stage},
        "task": task,
        "tasks": tasks,
        "metric": metric,
        "curves": curves,
        "has_reference": reference is not None,
    }


def drift_sources(session: Session, limit: int = 200) -> list[dict[str, Any]]:
    """Model jobs with at least one probed descendant (the choices of the drift view's picker)."""
    probe_parents = (
        sa.select(JobDependency.parent_id)
        .join(Job, Job.id == JobDependency.job_id)
        .where(Job.stage == "probe", Job.status == SUCCEEDED)
    )
    probed = set(session.scalars(probe_parents))
    if not probed:
        return []
    # a source is any model job with a probed job in its lineage: walk up from the probed models
    sources, frontier = set(probed), set(probed)
    while frontier:
        parents = set(session.scalars(sa.select(JobDependency.parent_id).where(JobDependency.job_id.in_(frontier))))
        frontier = parents - sources
        sources |= parents
    jobs = session.scalars(
        sa.select(Job).where(Job.id.in_(sources), Job.stage.in_(MODEL_STAGES)).order_by(Job.id.desc()).limit(limit)
    ).all()
    return [{"job_id": j.id, "name": j.name or f"job {j.id}", "stage": j.stage} for j in jobs]

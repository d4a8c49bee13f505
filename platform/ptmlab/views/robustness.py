"""The robustness view: attack results (`ptmlab.contracts.summaries.AttackSummary`) as one row per
attacked model, one column group per recipe (accuracy under attack, success rate, perturbed-word
ratio), the model's clean accuracy, and what made the model (a fine-tune with its adaptation and
defence, a compress method), optionally one pipeline's jobs only.

An attack summary's `source` is the reference the attack job was given, with `job:<name>`
replaced by the worker with the parent's run folder; `model_jobs` turns such references back
into jobs (by id for `job:<id>`, by run folder otherwise), as the compression view's robustness
axis does (`attacks_by_model`)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ptmlab import queue
from ptmlab.contracts.summaries import AttackSummary, CompressSummary, FinetuneSummary, StageSummary
from ptmlab.db.models import Job, Pipeline, Result
from ptmlab.results import ResultRow, cached_view, filter_options, load_rows, number

KIND = "attack"
MODEL_KINDS = ("finetune", "multitask", "compress")
METRICS = ("accuracy_under_attack", "success_rate", "perturbed_word_ratio", "queries")


def model_ref(ref: Any) -> str:
    """A model reference as the views compare them: a folder without a trailing slash and without
    the `export/task_model` the stages load from inside a run folder."""
    text = str(ref).rstrip("/")
    for suffix in ("/export/task_model", "/export"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    return text


def model_jobs(session: Session, refs: set[str]) -> dict[str, Job]:
    """Normalised reference (`model_ref`) -> the job that made the model, where one did."""
    ids = {ref: int(ref[4:]) for ref in refs if ref.startswith("job:") and ref[4:].isdigit()}
    folders = {ref for ref in refs if ref.startswith("/")}
    conditions = []
    if ids:
        conditions.append(Job.id.in_(set(ids.values())))
    if folders:
        conditions.append(Job.run_dir.in_(folders | {f"{f}/" for f in folders}))
    if not conditions:
        return {}
    jobs = list(session.scalars(sa.select(Job).where(sa.or_(*conditions))))
    by_id = {j.id: j for j in jobs}
    by_dir = {model_ref(j.run_dir): j for j in jobs if j.run_dir}
    out = {ref: by_id[i] for ref, i in ids.items() if i in by_id}
    out.update({ref: by_dir[ref] for ref in folders if ref in by_dir})
    return out


def _override(job: Job, key: str) -> str | None:
    for item in job.overrides or []:
        name, _, value = str(item).lstrip("+~").partition("=")
        if name == key:
            return value
    return None


def made_by(job: Job | None, summary: StageSummary | None) -> dict[str, Any]:
    """What made a model: its stage, and a fine-tune's adaptation and defence or a compress
    job's method; from the model job's own result, else from its overrides."""
    if job is None:
        return {"stage": None, "adaptation": None, "defence": None, "method": None, "text": "–"}
    # a fine-tune's defence settings are a field the contract does not declare (kept as an extra)
    defence = getattr(summary, "defence", _override(job, "defence"))
    if isinstance(defence, dict):
        defence = defence.get("name") or "yes"
    out = {"stage": job.stage, "adaptation": None, "defence": defence or None, "method": None}
    if job.stage == "compress":
        out["method"] = (summary.method if isinstance(summary, CompressSummary) else None) or _override(
            job, "compression"
        )
        out["text"] = f"compress: {out['method'] or '?'}"
    else:
        if job.stage in ("finetune", "multitask"):
            adaptation = summary.adaptation if isinstance(summary, FinetuneSummary) else None
            out["adaptation"] = adaptation or _override(job, "adaptation") or "full"
        out["text"] = (
            job.stage
            + (f" ({out['adaptation']})" if out["adaptation"] else "")
            + (f" + {out['defence']}" if out["defence"] else "")
        )
    return out


def model_summaries(session: Session, job_ids: set[int]) -> dict[int, StageSummary | None]:
    """Each model job's latest finetune/compress summary, as the views read it (`ResultRow.model`)."""
    if not job_ids:
        return {}
    ids = session.scalars(sa.select(Result.id).where(Result.job_id.in_(job_ids), Result.kind.in_(MODEL_KINDS)))
    return {r.job_id: r.model for r in load_rows(session, ids=list(ids))}  # oldest first: the latest wins


def attack_rows(rows: list[ResultRow]) -> list[ResultRow]:
    """The rows that read as attack summaries (`ResultRow.model`); the others have nothing to show."""
    return [r for r in rows if isinstance(r.model, AttackSummary)]


def attack_entry(row: ResultRow) -> dict[str, Any]:
    s = row.model
    return {
        "result_id": row.id,
        "job_id": row.job_id,
        "recipe": s.recipe or "-",
        "clean_accuracy": number(s.clean_accuracy),
        "num_examples": s.num_examples,
        "seed": s.seed,
        **{m: number(getattr(s, m)) for m in METRICS},
    }


def attacks_by_model(session: Session, rows: list[ResultRow] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Normalised model reference -> recipe -> the latest attack result on it (with `runs`, how
    many results that recipe has on the model). A `job:<id>` reference is also filed under the
    job's run folder, and a run folder under `job:<id>`, so either form finds it."""
    rows = attack_rows(load_rows(session, kind=KIND) if rows is None else rows)
    refs = {model_ref(r.model.source or "") for r in rows}
    jobs = model_jobs(session, refs)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:  # oldest first: a later result replaces an earlier one
        ref = model_ref(row.model.source or "")
        job = jobs.get(ref)
        keys = {ref} | ({f"job:{job.id}", model_ref(job.run_dir)} if job is not None and job.run_dir else set())
        entry = attack_entry(row)
        for key in keys:
            recipes = out.setdefault(key, {})
            runs = recipes.get(entry["recipe"], {}).get("runs", 0) + 1
            recipes[entry["recipe"]] = {**entry, "runs": runs}
    return out


def jobs_of(session: Session, rows: list[ResultRow]) -> dict[int, Job]:
    """The jobs that wrote `rows`, by id."""
    ids = {r.job_id for r in rows if r.job_id is not None}
    return {j.id: j for j in session.scalars(sa.select(Job).where(Job.id.in_(ids)))} if ids else {}


def in_pipeline(rows: list[ResultRow], jobs: dict[int, Job], pipeline_id: str) -> list[ResultRow]:
    """The rows whose job (`jobs`: `jobs_of`) belongs to pipeline `pipeline_id`."""
    return [r for r in rows if r.job_id in jobs and jobs[r.job_id].pipeline_id == pipeline_id]


def pipeline_rows(session: Session, rows: list[ResultRow], pipeline_id: str) -> list[ResultRow]:
    """`rows` of one pipeline's jobs, as the robustness page's pipeline filter keeps them
    (`ptmlab results robustness --pipeline`); NotFoundError naming an unknown pipeline."""
    queue.get_pipeline(session, pipeline_id)
    return in_pipeline(rows, jobs_of(session, rows), pipeline_id)


def robustness_view(
    session: Session,
    *,
    pipeline_id: str | None = None,
    task: str | None = None,
    sweep_id: str | None = None,
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    pipeline = None
    if pipeline_id is not None:
        found = queue.get_pipeline(session, pipeline_id)  # NotFoundError -> 404
        pipeline = {"id": found.id, "name": found.name}
    key = ("robustness", pipeline_id, task, sweep_id, tuple(sorted((tags or {}).items())))
    view = cached_view(
        session, (KIND, *MODEL_KINDS), key, lambda: _robustness(session, pipeline_id, task, sweep_id, tags)
    )
    return {**view, "filters": {**view["filters"], "pipeline": pipeline}}


def _robustness(
    session: Session, pipeline_id: str | None, task: str | None, sweep_id: str | None, tags: dict[str, str] | None
) -> dict[str, Any]:
    rows = attack_rows(load_rows(session, kind=KIND, sweep_id=sweep_id, tags=tags))
    attack_jobs = jobs_of(session, rows)
    if pipeline_id is not None:
        rows = in_pipeline(rows, attack_jobs, pipeline_id)
    tasks = sorted({r.model.task or "-" for r in rows})
    if task is not None:
        rows = [r for r in rows if (r.model.task or "-") == task]
    refs = {model_ref(r.model.source or "") for r in rows}
    jobs = model_jobs(session, refs)
    summaries = model_summaries(session, {j.id for j in jobs.values()})
    models: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:  # oldest first: a later result of the same model and recipe replaces an earlier one
        s: AttackSummary = row.model
        ref = model_ref(s.source or "")
        job = jobs.get(ref)
        model = models.get((ref, s.task or "-"))
        if model is None:
            model = models[(ref, s.task or "-")] = {
                "source": s.source or "-",
                "task": s.task or "-",
                "label": (job.name or f"job {job.id}") if job is not None else s.source or "-",
                "job_id": job.id if job is not None else None,
                "made_by": made_by(job, summaries.get(job.id) if job is not None else None),
                "clean_accuracy": None,
                "recipes": {},
            }
        entry = attack_entry(row)
        entry["runs"] = model["recipes"].get(entry["recipe"], {}).get("runs", 0) + 1
        entry["attack_job"] = attack_jobs[row.job_id].name if row.job_id in attack_jobs else None
        model["recipes"][entry["recipe"]] = entry
        model["clean_accuracy"] = entry["clean_accuracy"]
    recipes = sorted({r for m in models.values() for r in m["recipes"]})
    table = sorted(models.values(), key=lambda m: (m["task"], m["job_id"] or 0, m["label"]))
    # The same label twice (two pipelines' "teacher"): told apart by job id.
    counts: dict[str, int] = {}
    for m in table:
        counts[m["label"]] = counts.get(m["label"], 0) + 1
    for m in table:
        m["display"] = (
            m["label"]
            + (f" #{m['job_id']}" if counts[m["label"]] > 1 and m["job_id"] else "")
            + (f" [{m['task']}]" if len(tasks) > 1 and task is None else "")
        )
        # clean accuracies differ between recipes only when their samples do
        cleans = {e["clean_accuracy"] for e in m["recipes"].values()}
        m["same_sample"] = (
            len({(e["num_examples"], e["seed"]) for e in m["recipes"].values()}) == 1 and len(cleans) == 1
        )
    return {
        "rows": table,
        "recipes": recipes,
        "tasks": tasks,
        "result_count": len(rows),
        "chart": {
            "models": [m["display"] for m in table],
            "clean": [m["clean_accuracy"] for m in table],
            "recipes": {r: [m["recipes"].get(r, {}).get("accuracy_under_attack") for m in table] for r in recipes},
        },
        "options": {**filter_options(session, KIND), "pipelines": _pipelines(session)},
        "filters": {"task": task, "sweep_id": sweep_id, "tags": dict(tags or {})},
    }


def _pipelines(session: Session) -> list[dict[str, str]]:
    """Pipelines with at least one attack result."""
    query = (
        sa.select(Pipeline.id, Pipeline.name)
        .join(Job, Job.pipeline_id == Pipeline.id)
        .join(Result, Result.job_id == Job.id)
        .where(Result.kind == KIND)
        .distinct()
    )
    return [{"id": i, "name": n} for i, n in sorted(session.execute(query), key=lambda t: (t[1], t[0]))]

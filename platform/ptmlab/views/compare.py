"""Run detail and comparison: resolved configs side by side with the differing keys, headline
numbers, links to MLflow; metric curves from MLflow's metric history (the only view that reads
MLflow, and only for the few runs on the page)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ptmlab.contracts.secrets import redact_tree
from ptmlab.contracts.summaries import ProbeSummary, StageSummary
from ptmlab.db.models import Job
from ptmlab.errors import ConfigError, NotFoundError
from ptmlab.results import ResultRow, is_degenerate, load_rows, row_baseline
from ptmlab.settings import secret_literals
from ptmlab.tracking import mlflow_client, mlflow_run_link
from ptmlab.views.runs import run_label

ID_MAX = 2**31 - 1  # ids are 32-bit integer columns
MAX_RUNS = 10  # side by side stops being readable beyond this
# Summary keys that are bookkeeping, not results: shown in the header, not in the numbers table.
BOOKKEEPING = {"schema_version", "stage", "mlflow_run_id", "run_dir", "job_id"}


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists stay values."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out if out or not prefix else {prefix[:-1]: {}}
    return {prefix[:-1]: value}


def resolved_config(run_dir: str | None) -> dict[str, Any] | None:
    """The resolved config a stage wrote to its run folder (config.yaml, else Hydra's copy)."""
    import yaml

    if not run_dir:
        return None
    for name in ("config.yaml", ".hydra/config.yaml"):
        path = Path(run_dir) / name
        if path.is_file():
            try:
                loaded = yaml.safe_load(path.read_text())
            except yaml.YAMLError:
                continue
            if isinstance(loaded, dict):
                return loaded
    return None


def _config_of(row: ResultRow, job: Job | None) -> tuple[dict[str, Any], str]:
    """(flat config, where it came from), its secrets masked."""
    flat, source = _unredacted_config_of(row, job)
    return redact_tree(flat, secret_literals()), source


def _unredacted_config_of(row: ResultRow, job: Job | None) -> tuple[dict[str, Any], str]:
    run_dir = (row.model.run_dir if row.model else None) or (job.run_dir if job else None)
    cfg = resolved_config(run_dir)
    if cfg is not None:
        return flatten(cfg), "run folder"
    recorded = row.summary.get("hparams")
    if isinstance(recorded, dict) and recorded:  # the resolved config the stage recorded in its summary
        return {**recorded, "seed": row.summary.get("seed")}, "summary"
    if job is not None:  # the overrides as submitted: what differs from the defaults
        flat: dict[str, Any] = {"stage": job.stage, "seed": job.seed}
        for o in job.overrides or []:
            if "=" in o:
                key, value = o.split("=", 1)
                flat[key.lstrip("+~")] = value
        return flat, "job overrides"
    # Neither a run folder nor a job (a result recorded by hand): what the summary says it was.
    return {k: v for k, v in row.summary.items() if isinstance(v, str) and k not in BOOKKEEPING}, "summary"


def _parse_ids(ids: Sequence[int | str], what: str = "result") -> list[int]:
    out = []
    for i in ids:
        try:
            out.append(int(i))
        except (TypeError, ValueError):
            raise ConfigError(f"run id {i!r} is not a {what} id (an integer)") from None
    if not out:
        raise ConfigError(f"jobs: give at least one {what} id")
    if max(out) > ID_MAX or min(out) < 1:
        raise ConfigError(f"{what} id {max(out) if max(out) > ID_MAX else min(out)} is out of range (1 to {ID_MAX})")
    if len(out) > MAX_RUNS:
        raise ConfigError(f"jobs: at most {MAX_RUNS} runs can be compared, got {len(out)}")
    return list(dict.fromkeys(out))


def compare_view(session: Session, result_ids: Sequence[int | str]) -> dict[str, Any]:
    ids = _parse_ids(result_ids)
    by_id = {r.id: r for r in load_rows(session, ids=ids)}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise NotFoundError(f"result {missing[0]} not found")
    runs, configs = [], {}
    for i in ids:
        row = by_id[i]
        job = session.get(Job, row.job_id) if row.job_id is not None else None
        flat, source = _config_of(row, job)
        configs[i] = flat
        s = row.model
        if s is None:
            raise ConfigError(f"result {i}: its stored summary does not read as a summary")
        name = run_label(i, row.job_id, job.name if job else None)
        score, baseline = _main_score(row.summary), row_baseline(row.summary)
        link = mlflow_run_link(row.mlflow_run_id)
        runs.append(
            {
                # `label` names the run by its job (`#14`, `name (#14)`); `result_id` is internal
                "result_id": i,
                "job_id": row.job_id,
                "label": name,
                "name": name,
                "description": _label(row, s, job),
                "stage": s.stage,
                "kind": s.stage,
                "status": job.status if job else None,
                "sweep_id": row.sweep_id,
                "mlflow_run_id": row.mlflow_run_id,
                "mlflow_link": link,
                "mlflow_url": link,
                "run_dir": s.run_dir or (job.run_dir if job else None),
                "job_status": job.status if job else None,
                "config_source": source,
                "main_metric": getattr(s, "main_metric", None),
                "main_score": score,
                "baseline": None if baseline is None else baseline["value"],
                "degenerate": {"baseline": baseline["value"], "metric": baseline["metric"], "kind": baseline["kind"]}
                if is_degenerate(score, baseline)
                else None,
                "tags": row.tags,
                # every number the row recorded, as stored (a kind's extra fields too, none filled in)
                "numbers": {
                    k: v
                    for k, v in flatten(row.summary).items()
                    if k not in BOOKKEEPING and not isinstance(v, list | dict)
                },
                "layers": _probe_layers(s),
            }
        )
    keys = sorted({k for c in configs.values() for k in c})
    missing_mark = object()
    differing = [k for k in keys if len({repr(configs[i].get(k, missing_mark)) for i in ids}) > 1]
    number_keys = sorted({k for r in runs for k in r["numbers"]})
    main_metric = next((r["main_metric"] for r in runs if r["main_metric"]), None)
    main = _with_deltas("main_score", [r["main_score"] for r in runs])
    # the numbers that differ between the runs, the main metric's first: what a comparison answers
    differ_numbers = [
        _with_deltas(k, [r["numbers"].get(k) for r in runs])
        for k in number_keys
        if k not in NOT_RESULTS
        and not k.startswith(NOT_RESULT_PREFIXES)
        and any(
            isinstance(r["numbers"].get(k), int | float) and not isinstance(r["numbers"].get(k), bool) for r in runs
        )
        and len({repr(r["numbers"].get(k)) for r in runs}) > 1
    ]
    differ_numbers.sort(key=lambda m: (m["key"] not in (main_metric, f"metrics.{main_metric}"), metric_order(m["key"])))

    def by_key(names: list[str]) -> list[dict[str, Any]]:
        return [{"key": k, "values": [configs[i].get(k) for i in ids]} for k in names]

    return {
        "runs": runs,
        "main": {"metric": main_metric, **main},
        "metrics": differ_numbers,
        # the config keys that differ first (what tells the runs apart), then every key
        "config_diff": {"keys": by_key(differing), "differing": len(differing), "total": len(keys)},
        "config_all": by_key(keys),
        "config_keys": keys,
        "differing": differing,
        "configs": {str(i): configs[i] for i in ids},
        "number_keys": number_keys,
    }


# Numbers of a summary that are bookkeeping, not results (seeds, times of day, ids).
NOT_RESULTS = {"seed", "wall_time_s", "train_time_s", "job_id", "main_score"}
# The config (shown in its own table) and the confusion report (on the job page) are not the numbers compared.
NOT_RESULT_PREFIXES = ("hparams.", "confusion.", "backbone.", "baseline.")


def _main_score(summary: dict[str, Any]) -> float | None:
    score = summary.get("main_score")
    if score is None and isinstance(summary.get("compressed"), dict):
        score = summary["compressed"].get("score")  # a compress run's score is its compressed model's
    return score if isinstance(score, int | float) and not isinstance(score, bool) else None


def _with_deltas(key: str, values: list[Any]) -> dict[str, Any]:
    """Each run's value with its difference from the first run's (and in percent of it)."""
    base = values[0] if values and isinstance(values[0], int | float) and not isinstance(values[0], bool) else None
    deltas, percents = [], []
    for v in values:
        number_value = isinstance(v, int | float) and not isinstance(v, bool)
        deltas.append(v - base if number_value and base is not None else None)
        percents.append(100 * (v - base) / abs(base) if number_value and base not in (None, 0) else None)
    return {"key": key, "values": values, "delta": deltas, "delta_pct": percents}


def job_result_ids(session: Session, job_ids: Sequence[int | str]) -> list[int]:
    """Each job's newest result (a rerun's row is the later one), in the order given; a job
    without a result is a NotFoundError naming it."""
    import sqlalchemy as sa

    from ptmlab.db.models import Result

    ids = _parse_ids(job_ids, what="job")
    newest = dict(
        session.execute(
            sa.select(Result.job_id, sa.func.max(Result.id)).where(Result.job_id.in_(ids)).group_by(Result.job_id)
        )
        .tuples()
        .all()
    )
    missing = [i for i in ids if i not in newest]
    if missing:
        raise NotFoundError(f"job {missing[0]} has no result (it has not succeeded)")
    return [newest[i] for i in ids]


def _probe_layers(s: StageSummary) -> list[dict[str, Any]]:
    """A probe's per-layer scores as it recorded them (the fields it set); [] for other kinds."""
    return [e.model_dump(exclude_unset=True) for e in s.layers] if isinstance(s, ProbeSummary) else []


LABEL_FIELDS = ("model", "objective", "adaptation", "task", "method", "probe_task")  # each kind has some


def _label(row: ResultRow, s: StageSummary, job: Job | None) -> str:
    parts = [str(v) for v in (getattr(s, k, None) for k in LABEL_FIELDS) if v]
    seed = f" seed {s.seed}" if s.seed is not None else ""
    name = run_label(row.id, row.job_id, job.name if job else None)
    return f"{name} {s.stage or '?'}: {' / '.join(parts)}{seed}".strip()


def metric_curves(
    session: Session,
    result_ids: Sequence[int | str],
    keys: Sequence[str] | None = None,
    tracking_uri: str | None = None,
) -> dict[str, Any]:
    """{metric key: [{result_id, job_id, label, steps, values, times}]} from MLflow's metric history of each run,
    every metric it logged (the page groups and collapses them, it does not cap them); `times` are
    seconds since the run started (the wall-time axis).

    A run MLflow does not know (or an unreachable server) is reported per run, not raised: the
    rest of the page still shows."""
    ids = _parse_ids(result_ids)
    rows = {r.id: r for r in load_rows(session, ids=ids)}
    names = dict(
        session.execute(
            sa.select(Job.id, Job.name).where(Job.id.in_([r.job_id for r in rows.values() if r.job_id is not None]))
        )
        .tuples()
        .all()
    )
    # each run named by its job (`#14`, `name (#14)`): the legend's and the errors' names
    labels = {
        str(i): run_label(i, rows[i].job_id, names.get(rows[i].job_id)) if i in rows else f"result {i}" for i in ids
    }
    curves: dict[str, list[dict]] = {}
    errors: dict[str, str] = {}
    wanted = [k for k in (keys or []) if k]
    client = None
    for i in ids:
        row = rows.get(i)
        if row is None:
            errors[str(i)] = f"result {i} not found"
            continue
        if not row.mlflow_run_id:
            errors[str(i)] = "no MLflow run"
            continue
        try:
            if client is None:
                client = mlflow_client(tracking_uri)
            run = client.get_run(row.mlflow_run_id)
            names = wanted or sorted(run.data.metrics, key=metric_order)
            for key in names:
                history = sorted(client.get_metric_history(row.mlflow_run_id, key), key=lambda m: (m.step, m.timestamp))
                if history:
                    start = run.info.start_time or min(m.timestamp for m in history)  # milliseconds
                    curves.setdefault(key, []).append(
                        {
                            "result_id": i,
                            "job_id": row.job_id,
                            "label": labels[str(i)],
                            "steps": [m.step for m in history],
                            "values": [m.value for m in history],
                            "times": [round((m.timestamp - start) / 1000, 3) for m in history],
                        }
                    )
        except Exception as exc:
            errors[str(i)] = f"MLflow: {' '.join(str(exc).split())[:300]}"
    return {
        "curves": dict(sorted(curves.items(), key=lambda kv: metric_order(kv[0]))),
        "errors": errors,
        "labels": labels,
        "keys": sorted(curves, key=metric_order),
    }


def metric_order(key: str) -> tuple[int, str]:
    """Validation metrics first, then training, then the rest (throughput, one-off measurements):
    where a cap or a page cuts the list, what compares runs stays (alphabetical order put `train/*`
    and one-point compress numbers ahead of `val/*`)."""
    return (0 if key.startswith("val") else 1 if key.startswith("train") else 2, key)

"""The runs table: every result one row, any key of its summary a column (nested keys dotted:
`metrics.accuracy`, `config.sparsity`), sorted and filtered on any column, searched as free text
over the job's name, the tags and the summary's text values.

Rows are the `results` table through the results store (`ptmlab.results`) (each summary parsed once per process);
each row is flattened once too and kept on the cached row (results rows are only ever inserted),
so a request over 100,000 rows filters and sorts flat dicts and reads nothing again; the same
request again (a page polling) is served from the view cache."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ptmlab.db.models import Job, Result
from ptmlab.errors import ConfigError
from ptmlab.results import ResultRow, cached_view, load_rows, number

# Per-layer and per-head arrays say nothing in one cell: the job and run pages draw them.
SKIP_KEYS = {"layers", "tasks", "attention_heads", "heatmaps", "relations", "random_init", "latency", "source_latency",
             "replica_weights", "loops", "prediction_stats", "extraction"}
DEFAULT_COLUMNS = ("kind", "model", "task", "adaptation", "method", "probe_task", "main_score", "score")
MAX_COLUMNS = 30
FILTER = re.compile(r"^\s*([A-Za-z0-9_.:/\-]+)\s*(>=|<=|!=|>|<|=|~)\s*([^=!<>~\s].*?)\s*$")

def flatten(value: Any, prefix: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """{"metrics": {"accuracy": 0.9}} -> {"metrics.accuracy": 0.9}; scalars only (lists of scalars
    joined by commas, other lists and the SKIP_KEYS arrays left out)."""
    out = {} if out is None else out
    for key, v in value.items():
        name = f"{prefix}{key}"
        if key in SKIP_KEYS and not prefix:
            continue
        if isinstance(v, dict):
            flatten(v, f"{name}.", out)
        elif isinstance(v, list):
            if v and all(isinstance(x, str | int | float | bool) for x in v):
                out[name] = ", ".join(str(x) for x in v)
        elif v is not None:
            out[name] = v
    return out


def _flat_row(row: ResultRow, kind: str) -> tuple[dict[str, Any], str]:
    """(columns, search text) of a row, made once and kept on the cached row."""
    if row.flat is None:
        columns = flatten(row.summary)
        columns["kind"] = kind
        for tag, value in row.tags.items():
            columns[f"tag.{tag}"] = value
        row.flat = (columns, " ".join(str(v) for v in columns.values() if isinstance(v, str)).lower())
    return row.flat


def parse_filter(expression: str) -> tuple[str, str, str]:
    """`metrics.accuracy>=0.8`, `model=bert_tiny`, `task~glue` (contains) -> (key, op, value)."""
    match = FILTER.match(expression)
    if not match or not match.group(3):
        raise ConfigError(f"filter {expression!r} is not <column><op><value> with op one of = != > >= < <= ~")
    return match.group(1), match.group(2), match.group(3)


def _keep(value: Any, op: str, wanted: str) -> bool:
    if value is None:
        return op == "!="
    if op == "~":
        return wanted.lower() in str(value).lower()
    a, b = number(value), number(wanted)
    if a is not None and b is not None and not isinstance(value, bool):
        return {"=": a == b, "!=": a != b, ">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[op]
    text = str(value).lower() if not isinstance(value, bool) else str(value).lower()
    return {"=": text == wanted.lower(), "!=": text != wanted.lower()}.get(op, False)


def _sort_key(value: Any) -> tuple:
    """Numbers before text, missing values last (whatever the direction: see runs_view)."""
    n = number(value) if not isinstance(value, bool) else None
    return (0, n, "") if n is not None else (1, 0.0, str(value).lower())


def _job_names(session: Session, job_ids: list[int]) -> dict[int, str | None]:
    names: dict[int, str | None] = {}
    for start in range(0, len(job_ids), 5000):  # bounded IN lists
        chunk = job_ids[start:start + 5000]
        names.update(session.execute(sa.select(Job.id, Job.name).where(Job.id.in_(chunk))).tuples().all())
    return names


def runs_view(session: Session, *, kind: str | None = None, q: str | None = None, filters: list[str] | None = None,
              sort: str = "id", order: str = "desc", columns: list[str] | None = None,
              limit: int = 50, offset: int = 0) -> dict[str, Any]:
    parsed = [parse_filter(f) for f in filters or []]
    kinds = [kind] if kind else list(session.scalars(sa.select(Result.kind).distinct()))
    key = ("runs", kind, q, tuple(filters or ()), sort, order, tuple(columns or ()), limit, offset)
    return cached_view(session, kinds or ["-"], key,
                       lambda: _runs(session, kind, q, parsed, sort, order, columns, limit, offset))


def _runs(session: Session, kind: str | None, q: str | None, parsed: list[tuple[str, str, str]], sort: str, order: str,
          columns: list[str] | None, limit: int, offset: int) -> dict[str, Any]:
    rows = load_rows(session, kind=kind)
    job_ids = {r.job_id for r in rows if r.job_id is not None}
    names = _job_names(session, sorted(job_ids))
    kinds: Counter = Counter()
    available: Counter = Counter()
    numeric: set[str] = set()
    table = []
    for r in rows:
        values, text = _flat_row(r, str(r.summary.get("stage") or "?"))
        kinds[values["kind"]] += 1
        available.update(values.keys())
        numeric.update(k for k, v in values.items() if not isinstance(v, bool | str) and number(v) is not None)
        table.append((r, values, f"{text} {(names.get(r.job_id) or '').lower()}"))
    needle = (q or "").strip().lower()
    kept = [(r, values) for r, values, text in table
            if (not needle or needle in text) and all(_keep(values.get(k), op, v) for k, op, v in parsed)]
    if sort == "id":
        kept.sort(key=lambda t: t[0].id, reverse=order != "asc")
    else:
        present = [t for t in kept if t[1].get(sort) is not None]
        present.sort(key=lambda t: _sort_key(t[1][sort]), reverse=order != "asc")
        kept = present + [t for t in kept if t[1].get(sort) is None]  # missing values last either way
    chosen = [c for c in (columns or [c for c in DEFAULT_COLUMNS if c in available]) if c][:MAX_COLUMNS]
    page = kept[max(0, offset):max(0, offset) + max(1, limit)]
    return {
        "total": len(kept), "all": len(rows), "limit": limit, "offset": offset, "sort": sort, "order": order,
        "columns": chosen, "kinds": dict(sorted(kinds.items())),
        "available": [{"key": k, "count": n, "numeric": k in numeric}
                      for k, n in sorted(available.items(), key=lambda kv: (-kv[1], kv[0]))],
        "rows": [{"id": r.id, "job_id": r.job_id, "job_name": names.get(r.job_id), "sweep_id": r.sweep_id,
                  "values": {c: values.get(c) for c in chosen}} for r, values in page],
    }

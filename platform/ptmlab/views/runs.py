"""The runs table: every result one row, any key of its summary a column (nested keys dotted:
`metrics.accuracy`, `config.sparsity`), sorted and filtered on any column, searched as free text
over the job's name, the tags and the summary's text values.

Rows are the `results` table through the results store (`ptmlab.results`) (each summary parsed once per process);
each row is flattened once too and kept on the cached row (results rows are only ever inserted),
so a request over 100,000 rows filters and sorts flat dicts and reads nothing again; the same
request again (a page polling) is served from the view cache."""

from __future__ import annotations

import bisect
import difflib
import re
from collections import Counter, OrderedDict
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ptmlab.contracts.summaries import measured_on_top
from ptmlab.db.models import Job, Sweep
from ptmlab.errors import ConfigError
from ptmlab.results import ResultRow, cached_view, folded, is_degenerate, number, row_baseline, row_params
from ptmlab.views.run_groups import Grouping, run_label

# Per-layer and per-head arrays say nothing in one cell: the job and run pages draw them.
SKIP_KEYS = {
    "schema_version",  # the stored shape's, not the run's
    "layers",
    "tasks",
    "attention_heads",
    "heatmaps",
    "relations",
    "random_init",
    "latency",
    "source_latency",
    "replica_weights",
    "loops",
    "prediction_stats",
    "extraction",
    "source.latency",
    "confusion",
    "task_confusion",
    "hparams",
    "recipe.values",  # each value is its config key's (`stage.lr`), its origin `recipe.origin.stage.lr`
}
DEFAULT_COLUMNS = ("kind", "model", "task", "adaptation", "method", "probe_task", "main_score")
MAX_COLUMNS = 30
FILTER = re.compile(r"^\s*([A-Za-z0-9_.:/\-]+)\s*(>=|<=|!=|>|<|=|~)\s*([^=!<>~\s].*?)\s*$")


def flatten(value: Any, prefix: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """{"metrics": {"accuracy": 0.9}} -> {"metrics.accuracy": 0.9}; scalars only (lists of scalars
    joined by commas, other lists and the SKIP_KEYS arrays left out)."""
    out = {} if out is None else out
    for key, v in value.items():
        name = f"{prefix}{key}"
        if name in SKIP_KEYS:  # a compress summary's source measurement holds its latencies one level down
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
        columns = flatten(measured_on_top(row.summary))  # a compress row's `score` column is its compressed model's
        if columns.get("main_score") is None and columns.get("score") is not None:
            columns["main_score"] = columns["score"]  # one score column for every kind
        # the run's config keys (`hparams`: `stage.lr`) beside its summary's; a summary key of the same name wins
        for key, value in row_params(row).items():
            if value is not None:
                columns.setdefault(key, value)
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
        chunk = job_ids[start : start + 5000]
        names.update(session.execute(sa.select(Job.id, Job.name).where(Job.id.in_(chunk))).tuples().all())
    return names


def _sweep_names(session: Session, sweep_ids: list[str]) -> dict[str, str | None]:
    names: dict[str, str | None] = {}
    for start in range(0, len(sweep_ids), 5000):  # bounded IN lists
        chunk = sweep_ids[start : start + 5000]
        names.update(session.execute(sa.select(Sweep.id, Sweep.name).where(Sweep.id.in_(chunk))).tuples().all())
    return {i: names.get(i) for i in sweep_ids}


def runs_view(
    session: Session,
    *,
    kind: str | None = None,
    q: str | None = None,
    filters: list[str] | None = None,
    sort: str = "id",
    order: str = "desc",
    columns: list[str] | None = None,
    limit: int = 50,
    offset: int = 0,
    group_by: list[str] | None = None,
) -> dict[str, Any]:
    parsed = [parse_filter(f) for f in filters or []]
    kinds = [kind] if kind else None  # None: every row
    group_by = [g for g in group_by or [] if g]
    key = ("runs", kind, q, tuple(filters or ()), sort, order, tuple(columns or ()), limit, offset, tuple(group_by))
    return cached_view(
        session, kinds, key, lambda: _runs(session, kinds, q, parsed, sort, order, columns, limit, offset, group_by)
    )


# Keys every row has without its summary naming them.
BUILT_IN_KEYS = {"id", "kind", "sweep_id"}


def _run_fold(session: Session, kinds: list[str] | None):
    return folded(session, kinds, ("runs",), RunsFold, lambda state, rows: state.add(session, rows))


def check_keys(session: Session, keys: list[str] | tuple[str, ...], what: str, kinds: list[str] | None = None) -> None:
    """A key no stored run has is a ConfigError naming it (and the closest keys that exist), never
    a silent empty result. Nothing to check against while no run is stored."""
    fold, lock = _run_fold(session, kinds)
    with lock:
        unknown_in(fold, keys, what)


def unknown_in(fold: RunsFold, keys, what: str) -> None:
    if fold.table:
        refuse_unknown(keys, fold.available, what)


def refuse_unknown(keys, available, what: str) -> None:
    """ConfigError for the first of `keys` not in `available` (nor built in, nor a tag), naming it
    and the closest keys that are."""
    for key in keys:
        if key in BUILT_IN_KEYS or key in available or key.startswith("tag."):
            continue
        close = difflib.get_close_matches(key, list(available), n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(f"{what} {key!r} is in no run{hint}")


def row_keys(rows: list[ResultRow]) -> set[str]:
    """Every column key of `rows` (summary and config keys, dotted), each row flattened once."""
    out: set[str] = set()
    for r in rows:
        out.update(_flat_row(r, (r.model.stage if r.model else None) or "?")[0])
    return out


class _Desc:
    """A sort key compared the other way round: a descending list kept sorted with bisect."""

    __slots__ = ("key",)

    def __init__(self, key: tuple):
        self.key = key

    def __lt__(self, other: _Desc) -> bool:
        return other.key < self.key


class RunsFold:
    """The runs table kept up to date as results arrive (ptmlab.results `folded`): every row
    flattened once, the column counts, and per query (search, filters, sort) its matching rows in
    order, each new row put in its place rather than the table filtered and sorted again."""

    QUERIES = 16  # the queries kept in order per table (a page polls one or two)

    def __init__(self) -> None:
        self.table: list[tuple[ResultRow, dict[str, Any], str]] = []  # (row, columns, search text), oldest first
        self.names: dict[int, str | None] = {}  # job id -> job name
        self.sweeps: dict[str, str | None] = {}  # sweep id -> sweep name
        self.kinds: Counter = Counter()
        self.available: Counter = Counter()
        self.numeric: set[str] = set()
        self.config_keys: set[str] = set()  # keys that came from a run's config (`hparams`)
        # query -> (table rows read, rows with the sort column in order, rows without it in table order)
        self.queries: OrderedDict[tuple, tuple[int, list, list]] = OrderedDict()
        self.groupings: OrderedDict[tuple, Grouping] = OrderedDict()  # (search, filters, group keys, columns) -> groups

    def add(self, session: Session, rows: list[ResultRow]) -> None:
        self.names.update(
            _job_names(session, sorted({r.job_id for r in rows if r.job_id is not None} - set(self.names)))
        )
        self.sweeps.update(_sweep_names(session, sorted({r.sweep_id for r in rows if r.sweep_id} - set(self.sweeps))))
        for r in rows:
            values, text = _flat_row(r, (r.model.stage if r.model else None) or "?")
            self.kinds[values["kind"]] += 1
            self.available.update(values.keys())
            self.numeric.update(k for k, v in values.items() if not isinstance(v, bool | str) and number(v) is not None)
            self.config_keys.update(k for k in row_params(r) if k in values)
            # the search finds a run by its job's name and id, its sweep's id and name, its tags as key=value
            found_by = [
                self.names.get(r.job_id) or "",
                f"#{r.job_id}" if r.job_id is not None else "",
                r.sweep_id or "",
                self.sweeps.get(r.sweep_id) or "",
                *(f"{k}={v}" for k, v in r.tags.items()),
            ]
            self.table.append((r, values, f"{text} {' '.join(found_by).lower()}"))

    def matching(self, q: str | None, parsed: list[tuple[str, str, str]], sort: str, order: str) -> tuple[list, list]:
        """(rows with a `sort` value in order, rows without it in table order: shown last either way)."""
        key = (q, tuple(parsed), sort, order)
        read, present, missing = self.queries.pop(key, None) or (0, [], [])
        needle = (q or "").strip().lower()
        column = "id" if sort == "id" else sort
        if sort == "id":
            sort_key = (lambda t: t[0].id) if order == "asc" else (lambda t: _Desc((t[0].id,)))
        else:
            sort_key = (
                (lambda t: _sort_key(t[1][column])) if order == "asc" else (lambda t: _Desc(_sort_key(t[1][column])))
            )
        for r, values, text in self.table[read:]:
            if needle and needle not in text or not all(_keep(values.get(k), op, v) for k, op, v in parsed):
                continue
            if sort == "id" or values.get(sort) is not None:
                # after any equal key: the order a stable sort of the whole table gives
                bisect.insort_right(present, (r, values), key=sort_key)
            else:
                missing.append((r, values))
        self.queries[key] = (len(self.table), present, missing)
        while len(self.queries) > self.QUERIES:
            self.queries.popitem(last=False)
        return present, missing

    def grouping(
        self, q: str | None, parsed: list[tuple[str, str, str]], group_by: list[str], columns: list[str]
    ) -> Grouping:
        """The matching rows (search, filters) grouped by `group_by`, each new row taken into its group."""
        key = (q, tuple(parsed), tuple(group_by), tuple(columns))
        grouping = self.groupings.pop(key, None) or Grouping(list(group_by), list(columns))
        needle = (q or "").strip().lower()
        for r, values, text in self.table[grouping.read :]:
            if needle and needle not in text or not all(_keep(values.get(k), op, v) for k, op, v in parsed):
                continue
            grouping.add(r, values)
        grouping.read = len(self.table)
        self.groupings[key] = grouping
        while len(self.groupings) > self.QUERIES:
            self.groupings.popitem(last=False)
        return grouping


def _runs(
    session: Session,
    kinds: list[str] | None,
    q: str | None,
    parsed: list[tuple[str, str, str]],
    sort: str,
    order: str,
    columns: list[str] | None,
    limit: int,
    offset: int,
    group_by: list[str],
) -> dict[str, Any]:
    fold, lock = _run_fold(session, kinds)
    with lock:
        for what, keys in (
            ("column", columns or []),
            ("sort", [] if sort == "id" else [sort]),
            ("filter", [k for k, _, _ in parsed]),
            ("group_by", group_by),
        ):
            unknown_in(fold, keys, what)
        present, missing = fold.matching(q, parsed, sort, order)
        chosen = [c for c in (columns or [c for c in DEFAULT_COLUMNS if c in fold.available]) if c][:MAX_COLUMNS]
        start, stop = max(0, offset), max(0, offset) + max(1, limit)
        page = present[start:stop] + missing[max(0, start - len(present)) : max(0, stop - len(present))]
        names = fold.names
        out = {
            "total": len(present) + len(missing),
            "all": len(fold.table),
            "limit": limit,
            "offset": offset,
            "sort": sort,
            "order": order,
            "columns": chosen,
            "kinds": dict(sorted(fold.kinds.items())),
            "available": [
                {
                    "key": k,
                    "count": n,
                    "numeric": k in fold.numeric,
                    "source": "config" if k in fold.config_keys else "tag" if k.startswith("tag.") else "summary",
                }
                for k, n in sorted(fold.available.items(), key=lambda kv: (-kv[1], kv[0]))
            ],
            "rows": [
                {
                    "result_id": r.id,
                    "job_id": r.job_id,
                    "job_name": names.get(r.job_id),
                    "label": run_label(r.id, r.job_id, names.get(r.job_id)),
                    "sweep_id": r.sweep_id,
                    "values": {c: values.get(c) for c in chosen},
                    "degenerate": _degenerate(r),
                }
                for r, values in page
            ],
        }
        if group_by:
            grouping = fold.grouping(q, parsed, group_by, chosen)
            out["group_by"], out["group_total"] = group_by, len(grouping.groups)
            out["groups"] = grouping.page(names, sort, order, start, stop)
        return out


def _degenerate(row: ResultRow) -> dict[str, Any] | None:
    """{baseline, metric} where the run's main score is at or below its majority-class baseline."""
    baseline = row_baseline(row.summary)
    if not is_degenerate(row.summary.get("main_score"), baseline):
        return None
    return {"baseline": baseline["value"], "metric": baseline["metric"]}

"""The results store: the `results` table, one row per finished job's summary (the worker stores
the dump of its `ptmlab.contracts` summary model) and any summary recorded by hand. Every view,
export and results command reads it here, never MLflow, so they stay fast at tens of thousands of
runs.

    record_result / new_result(summary, *, job_id, sweep_id, tags) -> Result     write a row
    query_results(session, *, kind, sweep_id, job_id, tags, limit, offset)     a page of ORM rows (the API)
    load_rows(session, *, kind, sweep_id, tags, ids) -> [ResultRow]            oldest first, parsed once
    rows_by_id(session, ids) -> {id: ResultRow}                                the same by id, any number of ids
    read_rows(database_url, *, kind, sweep_id) -> [ResultRow]                  the same for a command line
    row_params(row) -> {dotted key: value}                                     a run's config keys (`stage.lr`)
    row_baseline(summary) -> {kind, metric, value} | None                      its majority-class baseline
    cached_view(session, kind, key, build)                                     a view kept while its rows are unchanged
    folded(session, kind, key, start, add, *, sweep_id, tags) -> state         an aggregate kept up to date row by row

`tags` filters are equalities on the row's tags (`{"demo": "true"}`), evaluated in SQL on both
SQLite and PostgreSQL.
"""

from __future__ import annotations

import gc
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ptmlab.contracts.summaries import SUMMARY_SCHEMA_VERSION, StageSummary, read_stored_summary, stored_summary_error
from ptmlab.db.models import Result, utcnow
from ptmlab.errors import ConfigError, NotFoundError

MAX_PAGE = 1000


def new_result(
    summary: StageSummary | dict[str, Any],
    *,
    job_id: int | None = None,
    sweep_id: str | None = None,
    tags: dict[str, Any] | None = None,
    kind: str | None = None,
) -> Result:
    """A Result row for `summary` (not added to a session), stamped with the current schema
    version. A summary model (the worker validated summary.json into it where it read the file)
    is stored as its `model_dump()`, not validated again; a dict (a result recorded by hand) is
    checked here: a value of the wrong type is refused naming it (no reader could show the row)."""
    if isinstance(summary, StageSummary):
        kind = kind or summary.stage
        summary = summary.model_dump()
    elif not isinstance(summary, dict):
        raise ConfigError("a result summary must be a JSON object")
    else:
        kind = kind or summary.get("stage")
        if not kind:
            raise ConfigError("summary has no `stage` (the result's kind)")
        error = stored_summary_error({"stage": kind, **summary})
        if error:
            raise ConfigError(f"result summary: {error}")
    summary = {**summary, "schema_version": summary.get("schema_version") or SUMMARY_SCHEMA_VERSION}
    return Result(
        job_id=job_id,
        kind=str(kind),
        mlflow_run_id=summary.get("mlflow_run_id"),
        sweep_id=sweep_id,
        summary=summary,
        tags={str(k): v for k, v in (tags or {}).items()},
        created_at=utcnow(),
    )


def record_result(
    session: Session,
    summary: dict[str, Any],
    *,
    job_id: int | None = None,
    sweep_id: str | None = None,
    tags: dict[str, Any] | None = None,
) -> Result:
    row = new_result(summary, job_id=job_id, sweep_id=sweep_id, tags=tags)
    session.add(row)
    session.commit()
    return row


def latest_job_result(session: Session, job_id: int, kind: str) -> tuple[int, dict[str, Any]] | None:
    """(id, summary) of a job's newest result of `kind` (a rerun's row is the later one), or None."""
    row = session.execute(
        sa.select(Result.id, Result.summary)
        .where(Result.job_id == job_id, Result.kind == kind)
        .order_by(Result.id.desc())
        .limit(1)
    ).first()
    return None if row is None else (row.id, row.summary or {})


def query_results(
    session: Session,
    *,
    kind: str | None = None,
    sweep_id: str | None = None,
    job_id: int | None = None,
    tags: dict[str, Any] | None = None,
    limit: int = 100,
    offset: int = 0,
    newest_first: bool = True,
) -> tuple[list[Result], int]:
    """Matching rows (a page of at most 1,000) and how many match in all."""
    query = sa.select(Result)
    if kind is not None:
        query = query.where(Result.kind == kind)
    if sweep_id is not None:
        query = query.where(Result.sweep_id == sweep_id)
    if job_id is not None:
        query = query.where(Result.job_id == int(job_id))
    for key, value in (tags or {}).items():
        query = query.where(Result.tags[str(key)].as_string() == str(value))
    if tags and job_id is None and sweep_id != "":
        # A tag is in the JSON: counting in SQL reads every row's tags; the count is kept instead.
        total = _folded_count(session, kind, sweep_id, tags)
    else:
        total = session.scalar(sa.select(sa.func.count()).select_from(query.subquery())) or 0
    order = (Result.created_at.desc(), Result.id.desc()) if newest_first else (Result.created_at, Result.id)
    limit = max(0, min(int(limit), MAX_PAGE))
    rows = session.scalars(query.order_by(*order).limit(limit).offset(max(0, int(offset)))).all()
    return list(rows), int(total)


def _folded_count(session: Session, kind: str | None, sweep_id: str | None, tags: dict[str, Any]) -> int:
    def add(state: list[int], rows: list[ResultRow]) -> None:
        state[0] += len(rows)

    state, lock = folded(
        session, kind, ("count",), lambda: [0], add, sweep_id=sweep_id, tags={str(k): str(v) for k, v in tags.items()}
    )
    with lock:
        return state[0]


# -- rows for the views and the results commands -----------------------------------------------


_UNREAD = object()


@dataclass
class ResultRow:
    """One results row as the views and commands read it: the summary parsed once, as JSON
    (`summary`) and as its contract model (`model`, made on first use and kept with the row: rows
    written before a contract field was required still load), the row's own id and sweep beside
    it rather than smuggled into the summary."""

    id: int
    job_id: int | None
    sweep_id: str | None
    mlflow_run_id: str | None
    summary: dict[str, Any]
    tags: dict[str, Any]
    flat: Any = None  # the runs table's flattened columns and search text, made once (ptmlab.views.runs)
    typed: Any = _UNREAD  # `model`, once read

    @property
    def model(self) -> StageSummary | None:
        """The summary as its kind's model (`ptmlab.contracts.summaries.read_stored_summary`; a
        kind with no contract as a `StageSummary`); None for a row that does not read, which
        `new_result` refuses and migration 0008 repaired in the rows stored before."""
        if self.typed is _UNREAD:
            self.typed = read_stored_summary(self.summary)
        return self.typed


def parse_tag_filter(tag: str | None) -> dict[str, str]:
    """`key=value[,key=value]` -> {key: value}; a bad entry names itself."""
    out: dict[str, str] = {}
    for part in (tag or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise ConfigError(f"tag filter {part!r} is not key=value")
        key, value = part.split("=", 1)
        if not key.strip():
            raise ConfigError(f"tag filter {part!r} has an empty key")
        out[key.strip()] = value.strip()
    return out


def _json(value: Any) -> dict[str, Any]:
    if isinstance(value, str | bytes):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}


def _kinds(kind: str | Sequence[str]) -> list[str]:
    return [kind] if isinstance(kind, str) else list(kind)


def _of_kinds(query: Any, kinds: list[str] | None) -> Any:
    """`query` restricted to rows of `kinds`; None: every row."""
    return query if kinds is None else query.where(Result.kind.in_(kinds))


def load_rows(
    session: Session,
    *,
    kind: str | Sequence[str] | None = None,
    sweep_id: str | None = None,
    tags: dict[str, str] | None = None,
    ids: Sequence[int] | None = None,
    after_id: int | None = None,
    through_id: int | None = None,
) -> list[ResultRow]:
    """Matching rows, oldest first (a later re-run replaces an earlier one downstream).

    The filters run in SQL over ids only; each row's JSON is parsed once per process and kept
    (results rows are only ever inserted), so a view over 10,000 rows does not re-read and
    re-parse 10,000 summaries every time one more run finishes."""
    query = sa.select(Result.id)
    if kind is not None:
        query = query.where(Result.kind.in_(_kinds(kind)))
    if sweep_id:
        query = query.where(Result.sweep_id == sweep_id)
    for key, value in (tags or {}).items():
        query = query.where(Result.tags[str(key)].as_string() == str(value))
    if ids is not None:
        query = query.where(Result.id.in_([int(i) for i in ids]))
    if after_id is not None:  # the rows added since a fold last read (`folded`)
        query = query.where(Result.id > int(after_id))
    if through_id is not None:
        query = query.where(Result.id <= int(through_id))
    wanted = list(session.scalars(query.order_by(Result.created_at, Result.id)))
    return _parsed_rows(session, wanted)


def rows_by_id(session: Session, ids: Sequence[int]) -> dict[int, ResultRow]:
    """The rows of `ids` (any number: read in bounded chunks), each parsed once per process."""
    return {r.id: r for r in _parsed_rows(session, list(dict.fromkeys(int(i) for i in ids)))}


def read_rows(
    database_url: str | None = None, *, kind: str | Sequence[str] = "finetune", sweep_id: str | None = None
) -> list[ResultRow]:
    """`load_rows` for a command line: the rows of `kind` (oldest first), optionally of one sweep,
    from `database_url` (default: the platform database). NotFoundError when it has no results
    table (a database never created or migrated)."""
    if database_url is None:
        from ptmlab.settings import get_settings

        database_url = get_settings().resolved_database_url
    engine = sa.create_engine(database_url)
    try:
        if not sa.inspect(engine).has_table(Result.__tablename__):
            raise NotFoundError(
                f"no results table in {engine.url.render_as_string(hide_password=True)} "
                f"(has the platform database been created?)"
            )
        with Session(engine) as session:
            query = sa.select(
                Result.id, Result.job_id, Result.sweep_id, Result.mlflow_run_id, Result.summary, Result.tags
            ).where(Result.kind.in_(_kinds(kind)))
            if sweep_id is not None:
                query = query.where(Result.sweep_id == sweep_id)
            rows = session.execute(query.order_by(Result.created_at, Result.id)).all()
    finally:
        engine.dispose()
    return [ResultRow(r.id, r.job_id, r.sweep_id, r.mlflow_run_id, _json(r.summary), _json(r.tags)) for r in rows]


_ROW_CACHE_MAX = 200_000
_FREEZE_AFTER_ROWS = 1_000
_rows_lock = threading.Lock()
_parsed: dict[str, dict[int, ResultRow]] = {}  # database URL -> id -> row


def _parsed_rows(session: Session, ids: list[int]) -> list[ResultRow]:
    key = session.get_bind().url.render_as_string(hide_password=False)
    with _rows_lock:
        known = _parsed.setdefault(key, {})
        missing = [i for i in ids if i not in known]
    fetched: dict[int, ResultRow] = {}
    for start in range(0, len(missing), 5000):  # bounded IN lists
        chunk = missing[start : start + 5000]
        query = sa.select(Result.id, Result.job_id, Result.sweep_id, Result.mlflow_run_id, Result.summary, Result.tags)
        for r in session.execute(query.where(Result.id.in_(chunk))):
            fetched[r.id] = ResultRow(r.id, r.job_id, r.sweep_id, r.mlflow_run_id, _json(r.summary), _json(r.tags))
    with _rows_lock:
        # A row deleted between the two queries is simply left out.
        out = [known[i] if i in known else fetched[i] for i in ids if i in known or i in fetched]
        if len(known) + len(fetched) <= _ROW_CACHE_MAX:
            known.update(fetched)
            if len(fetched) >= _FREEZE_AFTER_ROWS:
                # The cached rows live as long as the process; without this every full collection
                # walks all of them again (~150 ms of a 10,000-row leaderboard request). Only after
                # a large load: objects frozen while alive are never collected as cycles later.
                gc.freeze()
    return out


def filter_options(session: Session, kind: str | Sequence[str]) -> dict[str, Any]:
    """What the sweep and tag filters can choose from, for rows of `kind` (one or several); kept up
    to date row by row (`folded`), not re-read from every row."""

    def add(options: dict[str, Any], rows: list[ResultRow]) -> None:
        for row in rows:
            if row.sweep_id:
                options["sweeps"].add(row.sweep_id)
            for key, value in row.tags.items():
                values = options["tags"].setdefault(str(key), set())
                if len(values) < 50:  # a tag with a value per run (a run name) is no useful filter
                    values.add(str(value).lower() if isinstance(value, bool) else str(value))

    options, lock = folded(session, kind, ("filter options",), lambda: {"sweeps": set(), "tags": {}}, add)
    with lock:
        return {"sweeps": sorted(options["sweeps"]), "tags": {k: sorted(v) for k, v in sorted(options["tags"].items())}}


def row_params(row: ResultRow | dict[str, Any]) -> dict[str, Any]:
    """A run's config keys, flat and dotted (`stage.lr`, `model.name`): its summary's `hparams`
    (ptmlab.contracts.identity `config_params`); {} for a row stored without them."""
    summary = row.summary if isinstance(row, ResultRow) else row
    params = summary.get("hparams")
    return params if isinstance(params, dict) else {}


DEGENERATE_EPS = 1e-9


def row_baseline(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The main metric's majority-class baseline a run is judged against: its summary's `baseline`
    ({kind, metric, value}), or for an accuracy run stored before that field its
    `prediction_stats.majority_rate`; None where neither is recorded."""
    baseline = summary.get("baseline")
    if isinstance(baseline, dict) and number(baseline.get("value")) is not None:
        return {
            "kind": baseline.get("kind") or "majority_class",
            "metric": baseline.get("metric"),
            "value": number(baseline["value"]),
        }
    metric = str(summary.get("main_metric") or "").rsplit("/", 1)[-1]
    stats = summary.get("prediction_stats")
    rate = number(stats.get("majority_rate")) if isinstance(stats, dict) and metric == "accuracy" else None
    return None if rate is None else {"kind": "majority_class", "metric": "accuracy", "value": rate}


def is_degenerate(score: Any, baseline: dict[str, Any] | None) -> bool:
    """A score at or below its majority-class baseline: the run learnt nothing a constant guess does not."""
    score = number(score)
    return baseline is not None and score is not None and score <= baseline["value"] + DEGENERATE_EPS


def number(value: Any) -> float | None:
    """A finite float, or None (missing, text, NaN)."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out == out and out not in (float("inf"), float("-inf")) else None


# -- a small cache: the live dashboard asks for the same view every few seconds ---------------------
_CACHE_SIZE = 64
_cache: OrderedDict[tuple, Any] = OrderedDict()
_cache_lock = threading.Lock()


def cached_view(session: Session, kind: str | Sequence[str] | None, key: tuple, build: Callable[[], Any]) -> Any:
    """`build()`, or its earlier value while the `kind` rows (one kind or several; None: all) are unchanged. Results rows are
    only ever inserted (a re-run adds a row), so (count, max id) of the kind is a fingerprint.
    Callers must not mutate what they get back."""
    kinds = None if kind is None else _kinds(kind)
    count, max_id = _fingerprint(session, kinds)
    full_key = (
        session.get_bind().url.render_as_string(hide_password=False),
        kinds and tuple(kinds),
        key,
        count,
        max_id,
    )
    with _cache_lock:
        if full_key in _cache:
            _cache.move_to_end(full_key)
            return _cache[full_key]
    value = build()
    with _cache_lock:
        _cache[full_key] = value
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return value


def _fingerprint(session: Session, kinds: list[str] | None) -> tuple[int, int | None]:
    count, max_id = session.execute(_of_kinds(sa.select(sa.func.count(), sa.func.max(Result.id)), kinds)).one()
    return int(count), max_id


# -- folds: aggregates kept up to date as rows arrive, instead of rebuilt from every row ------------
_FOLDS_SIZE = 32


@dataclass
class _Fold:
    state: Any
    count: int  # rows of the kinds (every sweep and tag) when the fold last read
    max_id: int | None
    newest: Any  # the latest created_at folded in: a row older than it must not be appended
    lock: threading.Lock


_folds: OrderedDict[tuple, _Fold] = OrderedDict()


def folded(
    session: Session,
    kind: str | Sequence[str] | None,
    key: tuple,
    start: Callable[[], Any],
    add: Callable[[Any, list[ResultRow]], None],
    *,
    sweep_id: str | None = None,
    tags: dict[str, str] | None = None,
) -> tuple[Any, threading.Lock]:
    """(`state`, its lock): `start()` with every matching row folded in by `add(state, rows)`
    (oldest first, as `load_rows` returns them), kept per `key` and brought up to date on each call
    by folding in only the rows added since: a view over 100,000 rows reads the one new row, not
    all of them, when a job finishes. Results rows are only ever inserted; when the kind's rows are
    fewer than counted (a row deleted) or a new row is older than one folded (a clock step), the
    state is rebuilt from every row. Read the state under its lock (another request may be
    folding into it) and never mutate it outside `add`."""
    kinds = None if kind is None else _kinds(kind)  # None: every row
    count, max_id = _fingerprint(session, kinds)
    full_key = (
        session.get_bind().url.render_as_string(hide_password=False),
        kinds and tuple(kinds),
        key,
        sweep_id,
        tuple(sorted((tags or {}).items())),
    )
    with _cache_lock:
        fold = _folds.get(full_key)
        if fold is None:
            fold = _folds[full_key] = _Fold(start(), 0, None, None, threading.Lock())
        _folds.move_to_end(full_key)
        while len(_folds) > _FOLDS_SIZE:
            _folds.popitem(last=False)
    with fold.lock:
        if (fold.count, fold.max_id) == (count, max_id):
            return fold.state, fold.lock
        # Only rows up to the counted max id: one inserted meanwhile is folded in by the next call.
        since = _of_kinds(
            sa.select(sa.func.count(), sa.func.min(Result.created_at), sa.func.max(Result.created_at)).where(
                Result.id <= (max_id or 0)
            ),
            kinds,
        )
        if fold.max_id is not None:
            since = since.where(Result.id > fold.max_id)
        added, oldest, newest = session.execute(since).one()
        if fold.count + int(added) != count or (
            fold.newest is not None and oldest is not None and oldest < fold.newest
        ):
            fold.state, fold.count, fold.max_id, fold.newest = start(), 0, None, None
            newest = session.scalar(
                _of_kinds(sa.select(sa.func.max(Result.created_at)).where(Result.id <= (max_id or 0)), kinds)
            )
        try:
            add(
                fold.state,
                load_rows(
                    session, kind=kinds, sweep_id=sweep_id, tags=tags, after_id=fold.max_id, through_id=max_id or 0
                ),
            )
        except BaseException:
            fold.state, fold.count, fold.max_id, fold.newest = start(), 0, None, None  # half folded: start over
            raise
        fold.count, fold.max_id, fold.newest = count, max_id, newest if newest is not None else fold.newest
        return fold.state, fold.lock


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
        _folds.clear()
    with _rows_lock:
        _parsed.clear()

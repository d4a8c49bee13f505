"""The platform database: engine/session helpers and migrations.

    from ptmlab.db import session_scope, migrate
    migrate(url)                       # Alembic upgrade to head (idempotent, safe to race)
    with session_scope() as s:         # default URL: get_settings().resolved_database_url
        ...                            # commits on success, rolls back on error

SQLite (the embedded default) runs in WAL mode with a busy timeout, and every transaction
starts with `BEGIN IMMEDIATE`: a transaction takes the write lock up front, so two processes can
never both read "job 7 is queued" and both claim it, and no transaction ever has to upgrade a
read lock to a write lock (SQLite's deadlock that no busy timeout can resolve). PostgreSQL uses
the same code; the queue adds `FOR UPDATE SKIP LOCKED` there.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from ptmlab.db.models import (  # noqa: F401 - the package's public names
    ATTEMPT_STATES,
    CANCELLED,
    FAILED,
    JOB_STATES,
    LOST,
    PRUNED,
    QUEUED,
    REQUEUED,
    RUNNING,
    SUCCEEDED,
    TERMINAL_STATES,
    Attempt,
    Base,
    Job,
    JobDependency,
    Pipeline,
    Result,
    Study,
    Sweep,
    Worker,
    utcnow,
)

SQLITE_BUSY_TIMEOUT_MS = 30_000
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_PG_MIGRATION_LOCK = 72_317_001  # pg_advisory_xact_lock key: one migrator at a time

_lock = threading.Lock()
_engines: dict[str, sa.Engine] = {}
_migrated: set[str] = set()


def default_url() -> str:
    from ptmlab.settings import get_settings

    return get_settings().resolved_database_url


def is_sqlite(url_or_engine: str | sa.Engine) -> bool:
    url = url_or_engine.url if isinstance(url_or_engine, sa.Engine) else sa.make_url(url_or_engine)
    return url.get_backend_name() == "sqlite"


def check_database_url(url: str) -> None:
    """ConfigError for a URL whose user name or password holds an unencoded `@`: the driver would
    take the password's tail for the host and print it in its connection error."""
    from ptmlab.errors import ConfigError
    from ptmlab.settings import redact

    if "@" in (sa.make_url(url).host or ""):
        raise ConfigError(f"PTMLAB_DATABASE_URL {redact(url)}: an '@' in the user name or password must be written %40")


def create_engine(url: str) -> sa.Engine:
    """A new engine for `url` (SQLite: WAL, busy timeout, immediate transactions)."""
    check_database_url(url)
    if is_sqlite(url):
        path = sa.make_url(url).database
        if path and path != ":memory:":
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

        @sa.event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn, _record):
            # Let SQLAlchemy (the "begin" hook below), not the sqlite3 module, issue BEGIN.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
            cur.close()

        @sa.event.listens_for(engine, "begin")
        def _on_begin(conn):
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return sa.create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)


def get_engine(url: str | None = None, *, migrate_schema: bool = True) -> sa.Engine:
    """The process-wide engine for `url` (default: the settings' database), migrated once."""
    url = url or default_url()
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _engines[url] = create_engine(url)
    if migrate_schema and url not in _migrated:
        migrate(url, engine=engine)
    return engine


def dispose_engines() -> None:
    """Forget cached engines (tests switch PTMLAB_HOME; a forked child must not share pools)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
        _migrated.clear()


def get_sessionmaker(url: str | None = None) -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(url), expire_on_commit=False)


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    """A session that commits when the block succeeds and rolls back when it raises."""
    session = get_sessionmaker(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def migrate(url: str | None = None, *, engine: sa.Engine | None = None, revision: str = "head") -> None:
    """Apply the Alembic migrations up to `revision` (head; an earlier one builds a database as an
    older ptmlab left it). Concurrent callers (an API and workers starting together) serialise on
    the database's own lock: SQLite's immediate transaction, PostgreSQL's transaction-scoped
    advisory lock."""
    from alembic import command
    from alembic.config import Config

    url = url or default_url()
    own_engine = engine is None
    engine = engine or create_engine(url)
    try:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
            config.attributes["connection"] = conn
            command.upgrade(config, revision)
    finally:
        if own_engine:
            engine.dispose()
    if revision == "head":
        with _lock:
            _migrated.add(url)

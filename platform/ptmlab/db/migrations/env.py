"""Alembic environment: run programmatically by `ptmlab.db.migrate(url)`, which passes an open
connection (already inside its transaction and holding the migration lock)."""

from alembic import context

from ptmlab.db.models import Base

target_metadata = Base.metadata
config = context.config


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is None:  # the `alembic` command line: open our own engine
        from ptmlab.db import create_engine

        engine = create_engine(config.get_main_option("sqlalchemy.url"))
        with engine.begin() as connection:
            _run(connection)
        engine.dispose()
    else:
        _run(connection)


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite ALTER TABLE via batch mode
        compare_type=True,
    )
    # The caller owns the transaction; Alembic's own begin_transaction nests inside it.
    with context.begin_transaction():
        context.run_migrations()


run_migrations()

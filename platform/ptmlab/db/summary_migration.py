"""Bring the results rows stored before summaries had a schema version to the current shape, once
(migration 0008), so that the views read every row through its contract model and never patch one
up at a read: each value of the wrong type is dropped (`salvaged_summary`: a field then takes its
default, a list loses the entry; what the views used to skip at every read), a row without `stage`
takes its row's kind, and the row is stamped with `SUMMARY_SCHEMA_VERSION`. A row that is not a
JSON object, or of which nothing validates, is left as it is: the views leave it out, as before."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ptmlab.contracts.summaries import SUMMARY_SCHEMA_VERSION, salvaged_summary

_RESULTS = sa.table("results", sa.column("id", sa.Integer), sa.column("kind", sa.String), sa.column("summary", sa.JSON))
_BATCH = 500


def upgraded_summary(summary: Any, kind: str | None) -> dict[str, Any] | None:
    """`summary` in the current shape, or None when it cannot be read (left as stored)."""
    if not isinstance(summary, dict) or summary.get("schema_version") is not None:
        return None
    data = summary if summary.get("stage") or not kind else {**summary, "stage": kind}
    model = salvaged_summary(data)
    if model is None:
        return None
    return {**model.model_dump(exclude_unset=True), "schema_version": SUMMARY_SCHEMA_VERSION}


def upgrade_stored_summaries(connection: sa.Connection) -> int:
    """Rewrite every row stored before the schema version (in batches by id); how many changed."""
    changed, after = 0, 0
    while True:
        rows = connection.execute(
            sa.select(_RESULTS.c.id, _RESULTS.c.kind, _RESULTS.c.summary)
            .where(_RESULTS.c.id > after)
            .order_by(_RESULTS.c.id)
            .limit(_BATCH)
        ).all()
        if not rows:
            return changed
        for row in rows:
            upgraded = upgraded_summary(row.summary, row.kind)
            if upgraded is not None:
                connection.execute(sa.update(_RESULTS).where(_RESULTS.c.id == row.id).values(summary=upgraded))
                changed += 1
        after = rows[-1].id


def strip_schema_versions(connection: sa.Connection) -> None:
    """The downgrade: rows lose their version stamp (the values the upgrade dropped stay dropped)."""
    for row in connection.execute(sa.select(_RESULTS.c.id, _RESULTS.c.summary)).all():
        if isinstance(row.summary, dict) and "schema_version" in row.summary:
            summary = {k: v for k, v in row.summary.items() if k != "schema_version"}
            connection.execute(sa.update(_RESULTS).where(_RESULTS.c.id == row.id).values(summary=summary))

"""Migration 0008 (ptmlab.db.summary_migration): the results rows a database held before summaries
carried a schema version are brought to the current shape once, and read back with the same
leaderboard numbers as the same runs recorded today; the views read every row through its model
and patch none up at a read."""

from __future__ import annotations

import sqlalchemy as sa

from ptmlab.contracts.summaries import SUMMARY_SCHEMA_VERSION
from ptmlab.db import create_engine, dispose_engines, migrate, session_scope
from ptmlab.db.models import Result, utcnow
from ptmlab.errors import ConfigError
from ptmlab.results import clear_cache, new_result
from ptmlab.views import leaderboard_view

ACCURACY = {("full", 1): 0.81, ("full", 2): 0.83, ("full", 3): 0.85, ("lora", 1): 0.78, ("lora", 2): 0.8}


def finetune(adaptation: str, seed: int, **extra) -> dict:
    """A finetune row as ptmlab stored it before 0008 (no schema version, no wall time)."""
    return {
        "stage": "finetune",
        "model": "bert_tiny",
        "objective": "mlm",
        "adaptation": adaptation,
        "task": "sst2",
        "seed": seed,
        "metrics": {"accuracy": ACCURACY[adaptation, seed]},
        "main_metric": "accuracy",
        "main_score": ACCURACY[adaptation, seed],
        **extra,
    }


def stored_before() -> list[dict]:
    rows = [finetune(a, s) for (a, s) in ACCURACY if (a, s) != ("lora", 2)]
    # a value of the wrong type (once skipped at every read), and a bare row without `stage`
    rows.append(finetune("lora", 2, trainable_params="many"))
    rows[0] = {k: v for k, v in rows[0].items() if k != "stage"}
    return rows


def recorded_today() -> list[dict]:
    return [finetune(a, s) for (a, s) in ACCURACY]


def cells(view: dict) -> dict:
    return {row["label"]: {task: cell["mean"] for task, cell in row["cells"].items()} for row in view["rows"]}


def test_rows_stored_before_read_back_through_the_migration_with_the_same_leaderboard_numbers(db_url):
    migrate(db_url, revision="0007")  # the database as the ptmlab before schema versions left it
    engine = create_engine(db_url)
    with engine.begin() as conn:
        for summary in stored_before():
            conn.execute(
                sa.insert(Result.__table__).values(
                    kind="finetune", summary=summary, tags={"copy": "old"}, created_at=utcnow()
                )
            )
        conn.execute(sa.insert(Result.__table__).values(kind="custom", summary=[1, 2], tags={}, created_at=utcnow()))
    engine.dispose()
    dispose_engines()
    clear_cache()
    with session_scope(db_url) as s:  # the first connection of today's ptmlab migrates to head
        s.add_all(new_result(summary, tags={"copy": "today"}) for summary in recorded_today())
        s.commit()
        stored = {r.id: r.summary for r in s.scalars(sa.select(Result).order_by(Result.id))}
        migrated, today = (leaderboard_view(s, tags={"copy": c}, benchmark="glue") for c in ("old", "today"))
    old_ids = sorted(stored)[:6]
    assert all(stored[i]["schema_version"] == SUMMARY_SCHEMA_VERSION for i in old_ids[:5])
    assert stored[old_ids[0]]["stage"] == "finetune"  # the bare row took its row's kind
    assert "trainable_params" not in stored[old_ids[4]] and stored[old_ids[4]]["main_score"] == 0.8
    assert stored[old_ids[5]] == [1, 2]  # not a JSON object: left as it was (no view reads it)
    assert (
        cells(migrated)
        == cells(today)
        == {"bert_tiny / mlm / full": {"sst2": 83.0}, "bert_tiny / mlm / lora": {"sst2": 79.0}}
    )


def test_a_new_result_with_a_value_of_the_wrong_type_is_refused_naming_it():
    import pytest

    with pytest.raises(ConfigError, match=r"result summary: trainable_params: .*'many'"):
        new_result(finetune("full", 1, trainable_params="many"))
    assert new_result(finetune("full", 1)).summary["schema_version"] == SUMMARY_SCHEMA_VERSION

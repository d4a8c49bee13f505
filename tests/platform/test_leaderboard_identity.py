"""Grouping never hides a run: the leaderboard tells runs apart by their config hash and seed, not
by the keys it displays; a cell holding runs of several configs under one seed says so in the JSON
view, the text, CSV and LaTeX exports; multi-task results (kind `multitask`) get one cell per task,
marked multi-task."""

from __future__ import annotations

import csv
import io

import pytest

from ptmlab.contracts import validate_summary
from ptmlab.contracts.identity import config_hash
from ptmlab.db import dispose_engines, session_scope
from ptmlab.leaderboard import build_leaderboard, render_csv, render_latex, render_table
from ptmlab.results import clear_cache, new_result, read_rows
from ptmlab.views import leaderboard_view


def resolved_config(model: str, objective: str, tokenizer: str, backbone: str, seed: int) -> dict:
    return {
        "stage": {"name": "finetune", "lr": 1e-3},
        "model": {"name": model},
        "objective": {"name": objective},
        "tokenizer": {"name": tokenizer},
        "backbone": backbone,
        "task": {"name": "sst2"},
        "seed": seed,
        "paths": {"home": f"/tmp/{backbone}"},
        "tracking": {"job_id": backbone},
    }


def finetune(config: dict, accuracy: float, *, shown_model="bert_tiny", shown_objective="mlm", run_id="r") -> dict:
    """A finetune summary as stages/finetune.py writes it. The shown model/objective are what the
    `rows by` keys read: equal for two runs that really differ elsewhere (a backbone of another
    job, another tokenizer), the collision of issue 21."""
    return validate_summary(
        {
            "stage": "finetune",
            "seed": config["seed"],
            "wall_time_s": 1.0,
            "mlflow_run_id": run_id,
            "run_dir": f"/runs/{run_id}",
            "model": shown_model,
            "objective": shown_objective,
            "adaptation": "full",
            "task": "sst2",
            "backbone_source": "/runs/pretrain",
            "metrics": {"accuracy": accuracy},
            "main_metric": "accuracy",
            "main_score": accuracy,
            "trainable_params": 10,
            "total_params": 10,
            "train_time_s": 1.0,
            "steps": 4,
            "config_hash": config_hash(config),
        }
    ).model_dump(exclude_none=True)


def multitask(seed: int, sst2: float, rte: float, mr: float) -> dict:
    """The summary stages/multitask.py `run_multitask` writes for stage.tasks=[glue/sst2,glue/rte,senteval/mr]."""
    cfg = resolved_config("bert_tiny", "mlm", "wordpiece", "/runs/pretrain", seed)
    cfg["stage"] = {"name": "multitask", "tasks": ["glue/sst2", "glue/rte", "senteval/mr"]}
    task_metrics = {"sst2": {"accuracy": sst2}, "rte": {"accuracy": rte}, "mr": {"accuracy": mr, "macro_f1": 0.1}}
    return validate_summary(
        {
            "stage": "multitask",
            "seed": seed,
            "wall_time_s": 2.0,
            "mlflow_run_id": f"mt{seed}",
            "run_dir": f"/runs/mt{seed}",
            "model": "bert_tiny",
            "objective": "mlm",
            "adaptation": "multitask",
            "task": "sst2+rte+mr",
            "tasks": ["sst2", "rte", "mr"],
            "backbone_source": "/runs/pretrain",
            "sampling": "temperature",
            "temperature": 2.0,
            "sampling_probabilities": {"sst2": 0.5, "rte": 0.2, "mr": 0.3},
            "train_sizes": {"sst2": 60, "rte": 10, "mr": 30},
            "task_steps": {"sst2": 5, "rte": 2, "mr": 3},
            "task_metrics": task_metrics,
            "metrics": task_metrics["sst2"],
            "main_metric": "accuracy",
            "main_score": sst2,
            "task_main_metrics": {"sst2": "accuracy", "rte": "accuracy", "mr": "accuracy"},
            "trainable_params": 12,
            "total_params": 12,
            "train_time_s": 1.5,
            "steps": 10,
            "config_hash": config_hash(cfg),
        }
    ).model_dump(exclude_none=True)


MLM = resolved_config("bert_tiny", "mlm", "wordpiece", "/runs/pretrain-mlm", 1)
CLM = resolved_config("gpt_tiny", "clm", "bpe", "/runs/pretrain-clm", 1)


def test_two_configs_with_the_same_seed_and_colliding_keys_are_both_shown():
    a = finetune(MLM, 0.60, run_id="a")
    b = finetune(CLM, 0.70, run_id="b")  # displayed as bert_tiny / mlm too: the keys collide
    board = build_leaderboard([a, b])
    [row] = board.rows
    cell = row.cells["sst2"]
    assert cell.score.n == 2 and cell.score.mean == pytest.approx(0.65) and cell.seeds == [1, 1]
    assert cell.same_seed_runs == 2
    assert cell.flags == ["SST-2 seed 1: 2 runs of different configs (the rows-by keys do not tell them apart)"]
    assert "(n=2, 2 runs share a seed) !" in render_table(board)
    [csv_row] = csv.DictReader(io.StringIO(render_csv(board)))
    assert (
        csv_row["sst2/n"] == "2"
        and csv_row["sst2/same_seed_runs"] == "2"
        and "2 runs of different" in csv_row["sst2/flags"]
    )
    assert "$^\\dagger$" in render_latex(board) and "configurations under one seed" in render_latex(board)


def test_a_rerun_of_the_same_config_and_seed_replaces_the_earlier_run():
    first = finetune(MLM, 0.50, run_id="first")
    rerun = finetune({**MLM, "paths": {"home": "/elsewhere"}, "tracking": {"job_id": "9"}}, 0.60, run_id="again")
    other_seed = finetune({**MLM, "seed": 2}, 0.80, run_id="seed2")
    cell = build_leaderboard([first, rerun, other_seed]).rows[0].cells["sst2"]
    assert cell.score.n == 2 and cell.score.mean == pytest.approx(0.70) and not cell.flags and cell.same_seed_runs == 0


def test_legacy_summaries_without_a_hash_that_differ_in_what_they_record_both_stay():
    a = {
        "stage": "finetune",
        "model": "bert_tiny",
        "objective": "mlm",
        "adaptation": "full",
        "task": "sst2",
        "seed": 1,
        "metrics": {"accuracy": 0.6},
        "backbone_source": "/runs/3",
    }
    b = {**a, "backbone_source": "/runs/4", "metrics": {"accuracy": 0.7}}
    cell = build_leaderboard([a, b]).rows[0].cells["sst2"]
    assert cell.score.n == 2 and cell.same_seed_runs == 2


def test_a_multitask_run_shows_one_marked_cell_per_task():
    board = build_leaderboard([multitask(1, 0.8, 0.6, 0.7), multitask(2, 0.9, 0.5, 0.75)])
    [row] = board.rows
    assert row.config == {"model": "bert_tiny", "objective": "mlm", "adaptation": "multitask"}
    assert set(row.cells) == {"sst2", "rte", "mr"} and board.tasks == ["sst2", "rte", "mr"]
    assert all(c.multitask_runs == 2 and c.score.n == 2 for c in row.cells.values())
    assert row.cells["rte"].score.mean == pytest.approx(0.55)
    assert row.cells["mr"].score.mean == pytest.approx(0.725)  # mr's own main metric, not the run's first task's
    assert "(n=2, multi-task)" in render_table(board) and "$^\\ast$ multi-task runs" in render_latex(board)


def test_the_view_and_read_rows_read_multitask_results_and_show_colliding_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    clear_cache()
    with session_scope(url) as s:
        rows = [
            new_result(finetune(MLM, 0.60, run_id="a")),
            new_result(finetune(CLM, 0.70, run_id="b")),
            new_result(multitask(1, 0.8, 0.6, 0.7)),
        ]
        s.add_all(rows)
        s.flush()
        ids = [r.id for r in rows]
    assert [r.kind for r in rows] == ["finetune", "finetune", "multitask"]
    with session_scope(url) as s:
        view = leaderboard_view(s)
    by_config = {tuple(r["config"].values()): r for r in view["rows"]}
    full = by_config[("bert_tiny", "mlm", "full")]["cells"]["sst2"]
    assert full["n"] == 2 and sorted(full["result_ids"]) == ids[:2]
    assert full["mixed_configs"] is True and full["same_seed_runs"] == 2 and not full["multitask"]
    mt = by_config[("bert_tiny", "mlm", "multitask")]["cells"]
    assert set(mt) == {"sst2", "rte", "mr"}
    assert all(c["multitask"] and c["multitask_runs"] == 1 and c["result_ids"] == [ids[2]] for c in mt.values())
    assert mt["rte"]["mean"] == pytest.approx(60.0)
    loaded = read_rows(url, kind=("finetune", "multitask"))
    assert [r.summary["stage"] for r in loaded] == ["finetune", "finetune", "multitask"]
    board = build_leaderboard(loaded)
    assert len(board.rows) == 2
    assert {task: c.result_ids for r in board.rows for task, c in r.cells.items() if c.multitask_runs} == {
        "sst2": [ids[2]],
        "rte": [ids[2]],
        "mr": [ids[2]],
    }
    dispose_engines()

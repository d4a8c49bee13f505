"""The GLUE leaderboard: grouping, mean ± std over seeds, the GLUE average, degenerate-run flags,
CSV/LaTeX export, reading the results table and `ptmlab results glue`."""

from __future__ import annotations

import csv
import io
import os
import random
import re
import statistics
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from omegaconf import OmegaConf

from ptmlab.config import CONF_DIR
from ptmlab.errors import NotFoundError
from ptmlab.leaderboard import GLUE_TASKS, build_leaderboard, load_summaries, render_csv, render_latex, render_table

TASK_METRICS = {"cola": ["matthews_correlation", "accuracy"], "sst2": ["accuracy"], "mrpc": ["f1", "accuracy"],
                "stsb": ["pearson", "spearmanr"], "mnli": ["accuracy", "accuracy_mm"]}
CONFIGS = {"full": ["cola", "sst2", "mrpc", "stsb", "mnli"], "adapter": ["cola", "mrpc", "stsb", "mnli"]}
SEEDS = [1, 2, 3]


def summary(adaptation, task, seed, metrics, **extra):
    return {"stage": "finetune", "model": "bert_tiny", "objective": "mlm", "adaptation": adaptation, "task": task,
            "seed": seed, "metrics": metrics, "main_score": next(iter(metrics.values())),
            "mlflow_run_id": f"{adaptation}-{task}-{seed}", **extra}


@pytest.fixture()
def runs():
    rng = random.Random(7)
    out = []
    for adaptation, tasks in CONFIGS.items():
        for task in tasks:
            for seed in SEEDS:
                out.append(summary(adaptation, task, seed, {m: rng.uniform(0.3, 0.95) for m in TASK_METRICS[task]}))
    return out


def expected_cell(runs, adaptation, task):
    values = [r for r in runs if r["adaptation"] == adaptation and r["task"] == task]
    glue_metrics = GLUE_TASKS[task][1]
    per_metric = {m: [r["metrics"][m] for r in values] for m in glue_metrics}
    scores = [statistics.fmean(r["metrics"][m] for m in glue_metrics) for r in values]
    return per_metric, scores


def test_mean_std_over_seeds_and_the_glue_average(runs):
    board = build_leaderboard(runs + [{"stage": "pretrain", "model": "x", "steps": 3}])
    assert board.tasks == ["cola", "sst2", "mrpc", "stsb", "mnli"]  # GLUE order
    assert [r.config["adaptation"] for r in board.rows] == ["full", "adapter"]  # more tasks first
    for row in board.rows:
        adaptation = row.config["adaptation"]
        assert row.config == {"model": "bert_tiny", "objective": "mlm", "adaptation": adaptation}
        assert set(row.cells) == set(CONFIGS[adaptation]) and row.glue_tasks == len(CONFIGS[adaptation])
        task_means = []
        for task, cell in row.cells.items():
            per_metric, scores = expected_cell(runs, adaptation, task)
            assert list(cell.metrics) == list(GLUE_TASKS[task][1])  # CoLA shows MCC only
            for m, values in per_metric.items():
                assert cell.metrics[m].mean == pytest.approx(statistics.fmean(values))
                assert cell.metrics[m].std == pytest.approx(statistics.stdev(values))
                assert cell.metrics[m].n == 3
            assert cell.score.mean == pytest.approx(statistics.fmean(scores))
            assert cell.seeds == SEEDS and not cell.flags
            task_means.append(statistics.fmean(scores))
        assert row.glue_average == pytest.approx(statistics.fmean(task_means))


def test_a_rerun_of_the_same_seed_replaces_the_earlier_one(runs):
    rerun = summary("full", "sst2", 2, {"accuracy": 0.5})
    board = build_leaderboard(runs + [rerun])
    cell = board.rows[0].cells["sst2"]
    values = [r["metrics"]["accuracy"] for r in runs if r["adaptation"] == "full" and r["task"] == "sst2"]
    values[1] = 0.5
    assert cell.score.n == 3 and cell.score.mean == pytest.approx(statistics.fmean(values))


def test_degenerate_runs_are_flagged():
    runs = [
        summary("full", "cola", 1, {"matthews_correlation": 0.31, "accuracy": 0.75}),
        summary("full", "cola", 2, {"matthews_correlation": 0.0, "accuracy": 0.691}),
        summary("full", "sst2", 1, {"accuracy": 0.509},
                prediction_stats={"constant_prediction": True, "majority_rate": 0.509}),
        summary("full", "sst2", 2, {"accuracy": 0.88}, prediction_stats={"constant_prediction": False,
                                                                         "majority_rate": 0.509}),
        summary("full", "stsb", 1, {"pearson": float("nan"), "spearmanr": float("nan")}),
    ]
    row = build_leaderboard(runs).rows[0]
    assert row.cells["cola"].flags == ["CoLA seed 2: CoLA MCC = 0 (constant predictor?)"]
    assert row.cells["sst2"].flags == ["SST-2 seed 1: constant predictions (accuracy = majority rate 50.9)"]
    assert row.cells["stsb"].flags == ["STS-B seed 1: NaN pearson, spearmanr"]
    assert row.cells["stsb"].score.n == 0 and row.glue_tasks == 2  # NaN is not averaged in
    mnli_m_only = build_leaderboard([summary("full", "mnli", 1, {"accuracy": 0.7})])
    assert "70.0/- (n=1)" in render_table(mnli_m_only)  # matched only: the mismatched slot says so
    text = render_table(build_leaderboard(runs))
    assert "! bert_tiny / mlm / full: CoLA seed 2: CoLA MCC = 0 (constant predictor?)" in text
    assert "15.5±21.9 (n=2) !" in text  # CoLA MCC mean ± std over the two seeds, flagged


def test_non_glue_and_multi_task_results():
    runs = [
        summary("full", "mr", 1, {"accuracy": 0.8}, main_metric="accuracy"),
        summary("full", "mr", 2, {"accuracy": 0.7}, main_metric="accuracy"),
        summary("full", "rte", 1, {"accuracy": 0.6}),
        {"stage": "finetune", "model": "bert_tiny", "objective": "mlm", "adaptation": "multitask", "seed": 1,
         "task_metrics": {"rte": {"accuracy": 0.65}, "mrpc": {"f1": 0.8, "accuracy": 0.7}}},
    ]
    board = build_leaderboard(runs)
    assert board.tasks == ["mrpc", "rte", "mr"]  # GLUE tasks first, then the others
    full = next(r for r in board.rows if r.config["adaptation"] == "full")
    assert full.cells["mr"].score.mean == pytest.approx(0.75)
    assert full.glue_average == pytest.approx(0.6) and full.glue_tasks == 1  # mr is not GLUE
    multi = next(r for r in board.rows if r.config["adaptation"] == "multitask")
    assert multi.glue_average == pytest.approx((0.65 + 0.75) / 2)


def test_csv_and_latex_exports(runs):
    board = build_leaderboard(runs)
    rows = list(csv.DictReader(io.StringIO(render_csv(board))))
    assert [r["adaptation"] for r in rows] == ["full", "adapter"]
    per_metric, scores = expected_cell(runs, "full", "mrpc")
    assert float(rows[0]["mrpc/f1/mean"]) == pytest.approx(100 * statistics.fmean(per_metric["f1"]), abs=1e-4)
    assert float(rows[0]["mrpc/accuracy/std"]) == pytest.approx(100 * statistics.stdev(per_metric["accuracy"]), abs=1e-4)
    assert rows[0]["mrpc/n"] == "3" and rows[1]["sst2/n"] == "0" and rows[1]["sst2/score/mean"] == ""
    assert float(rows[0]["glue/average"]) == pytest.approx(100 * board.rows[0].glue_average, abs=1e-4)
    assert rows[0]["glue/tasks"] == "5"
    tex = render_latex(board)
    lines = tex.splitlines()
    assert lines[0] == "\\begin{tabular}{lllrrrrrr}" and lines[1] == "\\toprule" and lines[-2] == "\\end{tabular}"
    # the footnote: what the numbers are and how many seeds stand behind them
    assert lines[-1].startswith("\\par\\footnotesize Dev scores $\\times 100$, mean $\\pm$ sample std over seeds (")
    assert "best per column in bold" in lines[-1]
    assert "bert\\_tiny & mlm & full" in tex  # underscores escaped
    assert lines[2].startswith("Model & Objective & Adaptation & CoLA \\tiny{mcc} & SST-2")
    mean = statistics.fmean(per_metric["f1"])
    shown = f"{100 * mean:.1f}"
    assert re.search(rf"\$(\\mathbf{{{re.escape(shown)}}}|{re.escape(shown)}) \\pm "
                     rf"{100 * statistics.stdev(per_metric['f1']):.1f}\$", tex), tex
    # each column's best mean is bold, and only it
    for i, task in enumerate(board.tasks):
        means = [round(100 * r.cells[task].score.mean, 1) for r in board.rows if task in r.cells]
        bold = [ln.split(" & ")[3 + i] for ln in lines[4:-3] if "\\mathbf" in ln.split(" & ")[3 + i]]
        assert len(bold) == means.count(max(means)), (task, bold)
    assert sum(1 for ln in lines if ln.endswith("\\\\")) == 3  # header + two configurations


def test_glue_table_agrees_with_the_task_configs():
    for task, (display, metrics) in GLUE_TASKS.items():
        node = OmegaConf.load(CONF_DIR / "task" / "glue" / f"{task}.yaml")
        assert node.name == task and node.display_name == display
        assert list(node.glue_metrics) == list(metrics)
    assert sorted(p.stem for p in (CONF_DIR / "task" / "glue").glob("*.yaml")) == sorted(GLUE_TASKS)


# -- the results table --------------------------------------------------------------------------

def make_results_db(path: Path, summaries: list[dict], *, sweep_of=lambda s: None) -> str:
    """A `results` table as the platform contract defines it, rows written oldest first."""
    url = f"sqlite:///{path}"
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    results = sa.Table("results", meta,
                       sa.Column("id", sa.Integer, primary_key=True), sa.Column("job_id", sa.String, nullable=True),
                       sa.Column("kind", sa.String, nullable=False), sa.Column("mlflow_run_id", sa.String),
                       sa.Column("sweep_id", sa.String, nullable=True), sa.Column("summary", sa.JSON),
                       sa.Column("tags", sa.JSON), sa.Column("created_at", sa.DateTime))
    meta.create_all(engine)
    start = datetime(2026, 11, 1)
    with engine.begin() as conn:
        for i, s in enumerate(summaries):
            conn.execute(results.insert().values(kind=s.get("stage", "finetune"), mlflow_run_id=s.get("mlflow_run_id"),
                                                 sweep_id=sweep_of(s), summary=s, tags={},
                                                 created_at=start + timedelta(minutes=i)))
    engine.dispose()
    return url


def test_load_summaries_reads_the_results_table(tmp_path, runs):
    later = summary("full", "sst2", 2, {"accuracy": 0.5})
    pretrain = {"stage": "pretrain", "model": "bert_tiny", "steps": 10}
    url = make_results_db(tmp_path / "ptmlab.db", runs + [later, pretrain],
                          sweep_of=lambda s: "sweep-a" if s.get("adaptation") == "full" else None)
    loaded = load_summaries(url)
    assert len(loaded) == len(runs) + 1 and loaded[-1]["metrics"] == {"accuracy": 0.5}  # oldest first
    assert all(s["stage"] == "finetune" for s in loaded)
    only_a = load_summaries(url, sweep_id="sweep-a")
    assert {s["adaptation"] for s in only_a} == {"full"} and only_a[0]["sweep_id"] == "sweep-a"
    board = build_leaderboard(loaded)
    assert board.rows[0].cells["sst2"].score.n == 3
    with pytest.raises(NotFoundError, match="no results table in sqlite:///"):
        load_summaries(f"sqlite:///{tmp_path / 'empty.db'}")


def _cli(*args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "ptmlab.cli", "results", "glue", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_ptmlab_results_glue_command(tmp_path, runs):
    url = make_results_db(tmp_path / "ptmlab.db", runs)
    out = _cli("--database-url", url)
    assert out.returncode == 0, out.stderr
    header = out.stdout.splitlines()[0]
    assert header.split() == ["model", "objective", "adaptation", "CoLA", "mcc", "SST-2", "acc", "MRPC", "f1/acc",
                              "STS-B", "pearson/spearman", "MNLI", "acc/acc_mm", "GLUE", "avg"]
    assert "(5 tasks)" in out.stdout and "(4 tasks)" in out.stdout
    out = _cli("--format", "latex", "-o", str(tmp_path / "glue.tex"), env_extra={"PTMLAB_DATABASE_URL": url})
    assert out.returncode == 0 and "wrote" in out.stderr
    assert (tmp_path / "glue.tex").read_text() == render_latex(build_leaderboard(runs))
    out = _cli("--format", "csv", "--database-url", url, "--sweep", "nope")
    assert out.returncode == 0 and out.stdout == "" and "no finetune results in sweep nope" in out.stderr
    out = _cli("--database-url", f"sqlite:///{tmp_path / 'missing.db'}")
    assert out.returncode == 2 and out.stderr.startswith("error[not_found]: no results table")


def test_the_platform_side_never_imports_torch():
    code = ("import sys, ptmlab.leaderboard, ptmlab.contracts.task_checks, ptmlab.config, ptmlab.cli.results_cmds; "
            "assert 'torch' not in sys.modules and 'lightning_modules' not in sys.modules, 'torch imported'")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0

"""The GLUE leaderboard: grouping, mean ± std over seeds, the GLUE average, degenerate-run flags,
CSV/LaTeX export, each row's footprint (trainable parameters, delta size), the adaptation-mode
filter, reading the results table, the API and `ptmlab results glue`."""

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
from ptmlab.db.summary_migration import upgraded_summary
from ptmlab.errors import ConfigError, NotFoundError
from ptmlab.leaderboard import (
    GLUE_TASKS,
    Footprint,
    build_leaderboard,
    parse_adaptation_filter,
    render_csv,
    render_latex,
    render_table,
)
from ptmlab.results import read_rows

TASK_METRICS = {
    "cola": ["matthews_correlation", "accuracy"],
    "sst2": ["accuracy"],
    "mrpc": ["f1", "accuracy"],
    "stsb": ["pearson", "spearmanr"],
    "mnli": ["accuracy", "accuracy_mm"],
}
CONFIGS = {"full": ["cola", "sst2", "mrpc", "stsb", "mnli"], "adapter": ["cola", "mrpc", "stsb", "mnli"]}
SEEDS = [1, 2, 3]


def summary(adaptation, task, seed, metrics, **extra):
    return {
        "stage": "finetune",
        "model": "bert_tiny",
        "objective": "mlm",
        "adaptation": adaptation,
        "task": task,
        "seed": seed,
        "metrics": metrics,
        "main_score": next(iter(metrics.values())),
        "mlflow_run_id": f"{adaptation}-{task}-{seed}",
        **extra,
    }


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
        summary(
            "full",
            "sst2",
            1,
            {"accuracy": 0.509},
            prediction_stats={"constant_prediction": True, "majority_rate": 0.509},
        ),
        summary(
            "full",
            "sst2",
            2,
            {"accuracy": 0.88},
            prediction_stats={"constant_prediction": False, "majority_rate": 0.509},
        ),
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
        {
            "stage": "finetune",
            "model": "bert_tiny",
            "objective": "mlm",
            "adaptation": "multitask",
            "seed": 1,
            "task_metrics": {"rte": {"accuracy": 0.65}, "mrpc": {"f1": 0.8, "accuracy": 0.7}},
        },
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
    assert float(rows[0]["mrpc/accuracy/std"]) == pytest.approx(
        100 * statistics.stdev(per_metric["accuracy"]), abs=1e-4
    )
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
    assert re.search(
        rf"\$(\\mathbf{{{re.escape(shown)}}}|{re.escape(shown)}) \\pm "
        rf"{100 * statistics.stdev(per_metric['f1']):.1f}\$",
        tex,
    ), tex
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
    results = sa.Table(
        "results",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("job_id", sa.String, nullable=True),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("mlflow_run_id", sa.String),
        sa.Column("sweep_id", sa.String, nullable=True),
        sa.Column("summary", sa.JSON),
        sa.Column("tags", sa.JSON),
        sa.Column("created_at", sa.DateTime),
    )
    meta.create_all(engine)
    start = datetime(2026, 11, 1)
    with engine.begin() as conn:
        for i, s in enumerate(summaries):
            conn.execute(
                results.insert().values(
                    kind=s.get("stage", "finetune"),
                    mlflow_run_id=s.get("mlflow_run_id"),
                    sweep_id=sweep_of(s),
                    summary=s,
                    tags={},
                    created_at=start + timedelta(minutes=i),
                )
            )
    engine.dispose()
    return url


def test_read_rows_reads_the_results_table(tmp_path, runs):
    later = summary("full", "sst2", 2, {"accuracy": 0.5})
    pretrain = {"stage": "pretrain", "model": "bert_tiny", "steps": 10}
    url = make_results_db(
        tmp_path / "ptmlab.db",
        runs + [later, pretrain],
        sweep_of=lambda s: "sweep-a" if s.get("adaptation") == "full" else None,
    )
    loaded = read_rows(url)
    assert len(loaded) == len(runs) + 1 and loaded[-1].summary["metrics"] == {"accuracy": 0.5}  # oldest first
    assert all(r.summary["stage"] == "finetune" for r in loaded) and [r.id for r in loaded] == sorted(
        r.id for r in loaded
    )
    only_a = read_rows(url, sweep_id="sweep-a")
    assert {r.summary["adaptation"] for r in only_a} == {"full"} and only_a[0].sweep_id == "sweep-a"
    board = build_leaderboard(loaded)
    assert board.rows[0].cells["sst2"].score.n == 3
    # Every cell carries the rows behind it: the re-run's row, not the one it replaced.
    shown = [i for r in board.rows for c in r.cells.values() for i in c.result_ids]
    assert len(shown) == len(set(shown)) == len(loaded) - 1 and loaded[-1].id in shown
    with pytest.raises(NotFoundError, match="no results table in sqlite:///"):
        read_rows(f"sqlite:///{tmp_path / 'empty.db'}")


def _cli(*args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "results", "glue", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_ptmlab_results_glue_command(tmp_path, runs):
    url = make_results_db(tmp_path / "ptmlab.db", runs)
    out = _cli("--database-url", url)
    assert out.returncode == 0, out.stderr
    header = out.stdout.splitlines()[0]
    assert header.split() == [
        "model",
        "objective",
        "adaptation",
        "CoLA",
        "mcc",
        "SST-2",
        "acc",
        "MRPC",
        "f1/acc",
        "STS-B",
        "pearson/spearman",
        "MNLI",
        "acc/acc_mm",
        "GLUE",
        "avg",
        "trainable",
        "%",
        "trainable",
        "delta",
    ]
    assert "(5 tasks)" in out.stdout and "(4 tasks)" in out.stdout
    out = _cli("--format", "latex", "-o", str(tmp_path / "glue.tex"), env_extra={"PTMLAB_DATABASE_URL": url})
    assert out.returncode == 0 and "wrote" in out.stderr
    assert (tmp_path / "glue.tex").read_text() == render_latex(build_leaderboard(runs))
    out = _cli("--format", "csv", "--database-url", url, "--sweep", "nope")
    assert out.returncode == 0 and out.stdout == "" and "no finetune results in sweep nope" in out.stderr
    out = _cli("--database-url", f"sqlite:///{tmp_path / 'missing.db'}")
    assert out.returncode == 2 and out.stderr.startswith("error[not_found]: no results table")


def test_the_platform_side_never_imports_torch():
    code = (
        "import sys, ptmlab.leaderboard, ptmlab.contracts.task_checks, ptmlab.config, ptmlab.cli.results_cmds; "
        "assert 'torch' not in sys.modules and 'lightning_modules' not in sys.modules, 'torch imported'"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0


# -- the footprint (trainable parameters, delta size) and the adaptation filter ---------------------


def with_footprint(adaptation, task, seed, trainable, total, delta_bytes=None, **extra):
    delta = {} if delta_bytes is None else {"delta_params": delta_bytes // 4, "delta_bytes": delta_bytes}
    return summary(
        adaptation, task, seed, {"accuracy": 0.8}, trainable_params=trainable, total_params=total, **delta, **extra
    )


def test_footprint_is_the_mean_over_the_rows_runs_and_missing_fields_stay_missing():
    runs = [
        *(with_footprint("full", "sst2", s, 22_713_986, 22_713_986, 90_855_944) for s in (1, 2)),
        *(with_footprint("lora", "sst2", s, 74_498, 22_787_714, 297_992) for s in (1, 2)),
        # tasks differ by their head: the row shows the mean
        with_footprint("bitfit", "sst2", 1, 26_882, 22_713_986, 107_528),
        with_footprint("bitfit", "rte", 1, 26_884, 22_713_988, 107_536),
        summary("old", "sst2", 1, {"accuracy": 0.7}),  # from before the footprint was recorded
        # stored before migration 0008 with a value of the wrong type: the migration dropped it
        upgraded_summary(
            summary("broken", "sst2", 1, {"accuracy": 0.7}, trainable_params="many", total_params=0, delta_bytes=None),
            "finetune",
        ),
    ]
    rows = {r.config["adaptation"]: r.footprint for r in build_leaderboard(runs).rows}
    assert rows["full"].trainable_fraction == 1.0 and rows["full"].delta_bytes == 90_855_944
    assert rows["lora"].trainable_params == 74_498 and rows["lora"].trainable_fraction == pytest.approx(
        74_498 / 22_787_714
    )
    assert rows["bitfit"].trainable_params == 26_883 and rows["bitfit"].delta_bytes == 107_532
    assert rows["old"] == Footprint() and rows["old"].trainable_fraction is None
    assert rows["broken"].trainable_params is None and rows["broken"].trainable_fraction is None  # total 0: no share
    assert rows["lora"].texts() == {"trainable": "74.5k", "trainable_pct": "0.33%", "delta": "291.0 KiB"}
    assert rows["full"].texts() == {"trainable": "22.7M", "trainable_pct": "100.0%", "delta": "86.6 MiB"}
    assert rows["old"].texts() == {"trainable": "—", "trainable_pct": "—", "delta": "—"}


def test_a_bare_summary_without_a_stage_is_read_as_a_finetune_and_other_kinds_are_left_out():
    bare = {k: v for k, v in summary("full", "sst2", 2, {"accuracy": 0.9}).items() if k != "stage"}
    probe = {"stage": "probe", "model": "bert_tiny", "task": "sst2", "metrics": {"accuracy": 0.1}}
    board = build_leaderboard([summary("full", "sst2", 1, {"accuracy": 0.8}), bare, probe])
    (row,) = board.rows
    cell = row.cells["sst2"]
    assert (cell.seeds, cell.score.mean, cell.result_ids) == ([1, 2], pytest.approx(0.85), [])


def test_footprint_columns_in_the_text_csv_and_latex_tables():
    runs = [
        with_footprint("full", "sst2", 1, 22_713_986, 22_713_986, 90_855_944),
        with_footprint("lora", "sst2", 1, 74_498, 22_787_714, 297_992),
        with_footprint("prompt_tuning", "sst2", 1, 8_450, 22_721_666, 33_800),
        summary("old", "sst2", 1, {"accuracy": 0.7}),
    ]
    board = build_leaderboard(runs)
    lines = render_table(board).splitlines()
    assert lines[0].split()[-4:] == ["trainable", "%", "trainable", "delta"]
    rows = {ln.split()[2]: ln for ln in lines[2:]}
    assert rows["full"].endswith("22.7M      100.0%       86.6 MiB")
    assert rows["lora"].endswith("74.5k      0.33%        291.0 KiB")
    assert rows["prompt_tuning"].endswith("8.4k       0.037%       33.0 KiB")
    assert rows["old"].endswith("—          —            —")

    csv_rows = {r["adaptation"]: r for r in csv.DictReader(io.StringIO(render_csv(board)))}
    assert {k: csv_rows["lora"][k] for k in ("trainable_params", "total_params", "delta_params", "delta_bytes")} == {
        "trainable_params": "74498",
        "total_params": "22787714",
        "delta_params": "74498",
        "delta_bytes": "297992",
    }
    assert float(csv_rows["lora"]["trainable_pct"]) == pytest.approx(100 * 74_498 / 22_787_714, abs=1e-4)
    assert csv_rows["full"]["trainable_pct"] == "100"
    assert all(csv_rows["old"][k] == "" for k in ("trainable_params", "trainable_pct", "delta_bytes"))

    tex = render_latex(board).splitlines()
    assert tex[0] == "\\begin{tabular}{lllrrr}" and tex[2].endswith("& GLUE & Trainable \\tiny{\\% / delta} \\\\")
    tex_rows = {ln.split(" & ")[2].replace("\\_", "_"): ln.split(" & ")[-1] for ln in tex[4:-3]}
    assert tex_rows == {
        "full": "100.0\\% / 86.6 MiB \\\\",
        "lora": "0.33\\% / 291.0 KiB \\\\",
        "prompt_tuning": "0.037\\% / 33.0 KiB \\\\",
        "old": "-- \\\\",
    }
    # A board of older runs only has no footprint column in a paper table.
    assert render_latex(build_leaderboard(runs[-1:])).splitlines()[0] == "\\begin{tabular}{lllrr}"


def test_the_adaptation_filter():
    runs = [with_footprint(mode, "sst2", 1, 1000, 100_000) for mode in ("full", "lora", "bitfit")]
    assert [r.config["adaptation"] for r in build_leaderboard(runs, adaptations=["lora", "bitfit", "nope"]).rows] == [
        "bitfit",
        "lora",
    ]
    assert build_leaderboard(runs, adaptations=["nope"]).rows == []
    assert parse_adaptation_filter(" lora, bitfit,lora") == ["lora", "bitfit"]
    for bad in ("", " , ", "lora,,bitfit", "lo ra", "lora;drop"):
        with pytest.raises(ConfigError, match="adaptation"):
            parse_adaptation_filter(bad)


def test_the_leaderboard_api_shows_the_footprint_and_filters_by_mode(db_url, tmp_path, monkeypatch):
    from fastapi.testclient import TestClient
    from synthetic_results import SEED_ADAPTATION_FOOTPRINTS, seed_adaptation_results

    from ptmlab.api.app import create_app
    from ptmlab.db import session_scope
    from ptmlab.results import clear_cache, new_result
    from ptmlab.settings import Settings

    clear_cache()
    with session_scope(db_url) as s:
        seed_adaptation_results(s)
        s.add(new_result(summary("old", "sst2", 1, {"accuracy": 0.7})))  # no footprint recorded
        s.commit()
    monkeypatch.setenv("PTMLAB_HOME", str(tmp_path / "home"))
    client = TestClient(create_app(Settings(home=tmp_path / "home", database_url=db_url)))
    view = client.get("/api/v1/views/leaderboard").json()
    rows = {r["config"]["adaptation"]: r["footprint"] for r in view["rows"]}
    assert view["options"]["adaptations"] == ["bitfit", "full", "lora", "old", "prompt_tuning"]
    lora = SEED_ADAPTATION_FOOTPRINTS["lora"]
    assert rows["lora"]["trainable_params"] == lora["trainable_params"]
    assert rows["lora"]["trainable_pct"] == pytest.approx(100 * lora["trainable_params"] / lora["total_params"])
    assert rows["lora"]["delta_bytes"] == lora["delta_bytes"] and rows["lora"]["text"]["delta"] == "291.0 KiB"
    assert rows["old"]["trainable_params"] is None and rows["old"]["text"]["trainable"] == "—"

    picked = client.get("/api/v1/views/leaderboard", params={"adaptation": "lora,bitfit,unknown_mode"}).json()
    assert sorted(r["config"]["adaptation"] for r in picked["rows"]) == ["bitfit", "lora"]
    assert picked["filters"]["adaptation"] == ["bitfit", "lora", "unknown_mode"] and picked["result_count"] == 8
    assert picked["options"]["adaptations"] == view["options"]["adaptations"]  # the control still offers all
    csv_text = client.get("/api/v1/views/leaderboard", params={"adaptation": "lora", "format": "csv"}).text
    (only,) = csv.DictReader(io.StringIO(csv_text))
    assert only["adaptation"] == "lora" and only["delta_bytes"] == str(lora["delta_bytes"])
    glue = client.get("/api/v1/results/glue", params={"adaptation": "full"}).json()
    assert [r["config"]["adaptation"] for r in glue["rows"]] == ["full"]
    assert glue["rows"][0]["footprint"]["trainable_pct"] == pytest.approx(100.0)
    for path in ("/api/v1/views/leaderboard", "/api/v1/results/glue"):
        for bad in ("", ",", "lora,,bitfit", "lo ra"):
            r = client.get(path, params={"adaptation": bad})
            assert r.status_code == 422 and "adaptation" in r.json()["error"]["message"], (path, bad, r.text)


def test_ptmlab_results_glue_footprint_columns_and_adaptation_option(tmp_path):
    from synthetic_results import SEED_ADAPTATION_FOOTPRINTS, _finetune

    runs = [
        _finetune("minilm", "hf", mode, "sst2", seed, {"accuracy": 0.8}, fp)
        for mode, fp in SEED_ADAPTATION_FOOTPRINTS.items()
        for seed in (0, 1)
    ]
    url = make_results_db(tmp_path / "ptmlab.db", runs + [summary("old", "sst2", 1, {"accuracy": 0.7})])
    out = _cli("--database-url", url)
    assert out.returncode == 0, out.stderr
    rows = {ln.split()[2]: ln for ln in out.stdout.splitlines()[2:]}
    assert set(rows) == {*SEED_ADAPTATION_FOOTPRINTS, "old"} and rows["old"].rstrip().endswith("—")
    assert "74.5k" in rows["lora"] and "0.33%" in rows["lora"] and "291.0 KiB" in rows["lora"]
    out = _cli("--database-url", url, "--adaptation", "lora", "bitfit,prompt_tuning")
    assert out.returncode == 0, out.stderr
    assert sorted(ln.split()[2] for ln in out.stdout.splitlines()[2:]) == ["bitfit", "lora", "prompt_tuning"]
    out = _cli("--database-url", url, "--adaptation", "nope")
    assert out.returncode == 0 and "no finetune results of adaptation nope" in out.stderr
    out = _cli("--database-url", url, "--adaptation", ",")
    assert out.returncode == 2 and "adaptation" in out.stderr

"""The SuperGLUE average on the leaderboard (issue 23, item 4) from hand-made result rows: CB scores
the mean of accuracy and macro-F1, MultiRC of F1a and exact match, COPA's rows count when they
exist, GLUE's RTE stays out (and SuperGLUE's out of the GLUE average), the seed-by-seed comparison,
and `ptmlab results superglue` as text, CSV and LaTeX."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

import pytest
from synthetic_results import _finetune
from test_leaderboard import make_results_db

from ptmlab.leaderboard import build_leaderboard, compare_rows, r_label, render_latex


def rows() -> list[dict]:
    def run(adaptation, task, seed, metrics):
        return _finetune("bert_tiny", "mlm", adaptation, task, seed, metrics)

    return [
        run("full", "cb", 1, {"accuracy": 0.8, "macro_f1": 0.6}),  # CB score 0.7
        run("full", "cb", 2, {"accuracy": 0.9, "macro_f1": 0.7}),  # 0.8
        run("full", "multirc", 1, {"f1a": 0.6, "exact_match": 0.2}),  # 0.4
        run("full", "multirc", 2, {"f1a": 0.5, "exact_match": 0.1}),  # 0.3
        run("full", "superglue_rte", 1, {"accuracy": 0.7}),
        run("full", "superglue_rte", 2, {"accuracy": 0.6}),
        run("full", "copa", 1, {"accuracy": 0.9}),
        run("full", "copa", 2, {"accuracy": 0.75}),
        run("full", "rte", 1, {"accuracy": 0.5}),  # GLUE's RTE
        run("lora", "boolq", 1, {"accuracy": 0.62}),
        run("lora", "wic", 1, {"accuracy": 0.55}),
    ]


def test_superglue_average_from_hand_made_rows():
    board = build_leaderboard(rows(), benchmark="superglue")
    full, lora = board.rows  # the row with more SuperGLUE tasks first
    assert full.config["adaptation"] == "full" and full.average_tasks == 4  # cb, copa, multirc, rte
    assert full.cells["cb"].score.mean == pytest.approx(0.75)  # mean over seeds of (acc + F1) / 2
    assert full.cells["multirc"].score.mean == pytest.approx(0.35)
    assert full.average == pytest.approx((0.75 + 0.35 + 0.65 + 0.825) / 4)
    assert lora.average == pytest.approx((0.62 + 0.55) / 2) and lora.average_tasks == 2
    assert board.tasks[:6] == ["boolq", "cb", "copa", "multirc", "superglue_rte", "wic"] and board.tasks[6:] == ["rte"]
    assert board.column_metrics("cb") == ["accuracy", "macro_f1"] and board.display_name("superglue_rte") == "RTE"
    # the GLUE board counts only GLUE's RTE, and scores CB the same way in its own column
    glue = build_leaderboard(rows())
    glue_full = next(r for r in glue.rows if r.config["adaptation"] == "full")
    assert glue_full.glue_average == pytest.approx(0.5) and glue_full.glue_tasks == 1
    assert glue_full.cells["cb"].score.mean == pytest.approx(0.75)


def test_superglue_average_compared_seed_by_seed():
    board = build_leaderboard(rows(), benchmark="superglue")
    full = board.rows[0]
    # per seed: (0.7 + 0.4 + 0.7 + 0.9) / 4 and (0.8 + 0.3 + 0.6 + 0.75) / 4
    from ptmlab.leaderboard.grouping import per_seed_glue_average

    assert per_seed_glue_average(full, board.benchmark)[1] == pytest.approx([0.675, 0.6125])
    compared = compare_rows(board, r_label(full), r_label(full))
    assert compared[-1]["name"] == "SuperGLUE avg" and compared[-1]["task"] == "superglue"


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "results", "superglue", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )


def test_ptmlab_results_superglue_text_csv_latex(tmp_path):
    url = make_results_db(tmp_path / "ptmlab.db", rows())
    out = _cli("--database-url", url)
    assert out.returncode == 0, out.stderr
    header = out.stdout.splitlines()[0].split()
    assert header[3:17] == [
        "BoolQ",
        "acc",
        "CB",
        "acc/macro_f1",
        "COPA",
        "acc",
        "MultiRC",
        "f1a/em",
        "RTE",
        "acc",
        "WiC",
        "acc",
        "SuperGLUE",
        "avg",
    ]
    assert "64.4 (4 tasks)" in out.stdout and "58.5 (2 tasks)" in out.stdout and "50.0" not in out.stdout  # no GLUE RTE
    out = _cli("--database-url", url, "--format", "csv")
    table = list(csv.DictReader(io.StringIO(out.stdout)))
    assert float(table[0]["superglue/average"]) == pytest.approx(64.375) and table[0]["superglue/tasks"] == "4"
    assert float(table[0]["multirc/score/mean"]) == pytest.approx(35.0) and "rte/n" not in table[0]
    out = _cli("--database-url", url, "--format", "latex", "-o", str(tmp_path / "sg.tex"))
    assert out.returncode == 0 and "wrote" in out.stderr
    latex = (tmp_path / "sg.tex").read_text()
    assert latex == render_latex(
        build_leaderboard(
            rows(), benchmark="superglue", tasks=["boolq", "cb", "copa", "multirc", "superglue_rte", "wic", "wsc"]
        )
    )
    assert " & SuperGLUE" in latex and "\\textbf{64.4}" in latex
    empty = make_results_db(tmp_path / "glue_only.db", rows()[8:9])
    out = _cli("--database-url", empty)
    assert out.returncode == 0 and out.stdout == "" and "no finetune results of SuperGLUE tasks" in out.stderr


def test_the_superglue_api_view(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from ptmlab.api.app import create_app
    from ptmlab.db import dispose_engines, session_scope
    from ptmlab.results import clear_cache, new_result
    from ptmlab.settings import Settings

    url = f"sqlite:///{tmp_path / 'platform.db'}"
    clear_cache()
    try:
        client = TestClient(create_app(Settings(home=tmp_path / "home", database_url=url)))
        monkeypatch.setenv("PTMLAB_HOME", str(tmp_path / "home"))
        with session_scope(url) as s:
            for summary in rows():
                s.add(new_result(summary))
            s.commit()
        view = client.get("/api/v1/results/superglue").json()
        assert view["benchmark"] == {"name": "superglue", "display_name": "SuperGLUE", "averaged": True}
        assert [t["task"] for t in view["tasks"]] == ["boolq", "cb", "copa", "multirc", "superglue_rte", "wic"]
        full = next(r for r in view["rows"] if r["config"]["adaptation"] == "full")
        assert full["average"] == pytest.approx(64.375) and full["average_tasks"] == 4
        glue = client.get("/api/v1/results/glue").json()
        assert glue["benchmark"]["name"] == "glue" and "rte" in [t["task"] for t in glue["tasks"]]
    finally:
        clear_cache()
        dispose_engines()


def test_dashboard_leaderboard_route_takes_the_benchmark(tmp_path, monkeypatch):
    # The page's view route (GET /api/v1/views/leaderboard?benchmark=) on the same hand-made rows.
    from fastapi.testclient import TestClient

    from ptmlab.api.app import create_app
    from ptmlab.db import dispose_engines, session_scope
    from ptmlab.results import clear_cache, new_result
    from ptmlab.settings import Settings

    url = f"sqlite:///{tmp_path / 'platform.db'}"
    monkeypatch.setenv("PTMLAB_HOME", str(tmp_path / "home"))
    clear_cache()
    with TestClient(create_app(Settings(home=tmp_path / "home", database_url=url))) as client:
        with session_scope(url) as s:
            s.add_all([new_result(r) for r in rows()])
        view = "/api/v1/views/leaderboard"
        sg = client.get(view, params={"benchmark": "superglue"}).json()
        assert sg["benchmark"] == {"name": "superglue", "display_name": "SuperGLUE", "averaged": True}
        assert [t["task"] for t in sg["tasks"]] == ["boolq", "cb", "copa", "multirc", "superglue_rte", "wic"]
        full = next(r for r in sg["rows"] if r["config"]["adaptation"] == "full")
        assert full["average"] == pytest.approx(100 * (0.75 + 0.35 + 0.65 + 0.825) / 4) and full["average_tasks"] == 4
        assert [b["name"] for b in sg["options"]["benchmarks"]] == ["glue", "superglue", "tasks", "generation"]
        glue = client.get(view).json()  # the default board: GLUE's average, every task a column
        glue_full = next(r for r in glue["rows"] if r["config"]["adaptation"] == "full")
        assert glue["benchmark"]["name"] == "glue" and glue_full["average"] == pytest.approx(50.0)
        assert "rte" in [t["task"] for t in glue["tasks"]]
        csv_text = client.get(view, params={"benchmark": "superglue", "format": "csv"})
        assert "superglue/average" in csv_text.text.splitlines()[0]
        assert "superglue_leaderboard.csv" in csv_text.headers["content-disposition"]
        label = "bert_tiny / mlm / full"
        compared = client.get(f"{view}/compare", params={"a": label, "b": label, "benchmark": "superglue"}).json()
        assert compared["comparisons"][-1]["name"] == "SuperGLUE avg"
        bad = client.get(view, params={"benchmark": "superglu"})
        assert bad.status_code == 422
        assert (
            bad.json()["error"]["message"] == "benchmark=superglu is unknown; valid: glue, superglue, tasks, generation"
        )
    dispose_engines()

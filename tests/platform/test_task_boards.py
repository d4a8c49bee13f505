"""The "tasks" and "generation" leaderboards (issues 23 and 24, item 6) from hand-made result rows:
tasks held by their kind whatever their name (SQuAD EM/F1, entity F1 and token accuracy, choice
accuracy; BLEU/chrF, ROUGE from their 0-100 scale), each scored by its run's main metric, no
average, COPA kept on SuperGLUE's board, a row from before `task_kind` placed by what it records;
the A/B test per task; `ptmlab results generation|tasks` (text, CSV, LaTeX, an unknown board);
`GET /api/v1/results/{benchmark}` and the page's view route."""

from __future__ import annotations

import csv
import io

import pytest

from ptmlab.contracts import FinetuneSummary
from ptmlab.leaderboard import build_leaderboard, compare_rows, r_label, render_csv, render_latex, render_table


def run(adaptation: str, task: str, kind: str | None, seed: int, metrics: dict, main: str, **extra) -> dict:
    return FinetuneSummary(
        seed=seed,
        wall_time_s=1.0,
        model="t5_tiny",
        objective="span_corruption",
        adaptation=adaptation,
        task=task,
        task_kind=kind,
        metrics=metrics,
        main_metric=main,
        main_score=metrics[main],
        trainable_params=10,
        total_params=100,
        train_time_s=1.0,
        steps=10,
        **extra,
    ).model_dump()


def rows() -> list[dict]:
    squad = {"exact_match": 0.40, "f1": 0.50}
    return [
        run("full", "squad_v1", "span_extraction", 1, squad, "f1"),
        run("full", "squad_v1", "span_extraction", 2, {"exact_match": 0.50, "f1": 0.60}, "f1"),
        run(
            "full",
            "wnut17",
            "token_classification",
            1,
            {"entity_f1": 0.30, "token_accuracy": 0.90, "entity_f1_strict": 0.28, "entity_f1_test": 0.25},
            "entity_f1",
        ),
        run("full", "upos", "token_classification", 1, {"token_accuracy": 0.95}, "token_accuracy"),
        run("full", "multiple_choice", "multiple_choice", 1, {"accuracy": 0.75}, "accuracy"),
        run("full", "copa", "multiple_choice", 1, {"accuracy": 0.60}, "accuracy"),  # SuperGLUE's
        run("full", "sst2", "classification", 1, {"accuracy": 0.80}, "accuracy"),
        run("lora", "squad_v1", "span_extraction", 1, {"exact_match": 0.20, "f1": 0.30}, "f1"),
        run("lora", "squad_v1", "span_extraction", 2, {"exact_match": 0.30, "f1": 0.35}, "f1"),
        # generation: sacreBLEU and rouge-score values are stored 0-100
        run("full", "wmt16_en_ro", "generation", 1, {"bleu": 20.0, "chrf": 45.0, "length_ratio": 0.97}, "bleu"),
        run("full", "wmt16_en_ro", "generation", 2, {"bleu": 24.0, "chrf": 47.0, "length_ratio": 1.01}, "bleu"),
        run(
            "full",
            "dialogsum",
            "generation",
            1,
            {"rouge1": 30.0, "rouge2": 10.0, "rougeL": 25.0, "rougeLsum": 26.0, "bleu": 5.0},
            "rougeL",
        ),
        # a row from before task_kind: its generation numbers say what it is
        run(
            "lora",
            "wmt16_en_ro",
            None,
            1,
            {"bleu": 10.0, "chrf": 30.0},
            "bleu",
            generation={
                "decoding": {"strategy": "beam"},
                "metric_signatures": {},
                "generated_tokens": 5,
                "latency_ms_per_example": 3.0,
            },
        ),
    ]


def test_the_tasks_board_holds_its_kinds_scored_by_their_main_metric():
    board = build_leaderboard(rows(), benchmark="tasks", own_tasks=True)
    assert board.tasks == ["squad_v1", "upos", "wnut17", "multiple_choice"]  # QA, tagging, choice; COPA is SuperGLUE's
    full, lora = board.rows  # the row with more tasks first
    assert full.average is None and full.average_tasks == 0  # no average across kinds
    squad = full.cells["squad_v1"]
    assert squad.metrics["exact_match"].mean == pytest.approx(0.45) and squad.score.mean == pytest.approx(0.55)
    assert squad.score.std == pytest.approx(0.0707, abs=1e-4) and squad.score.n == 2
    assert board.column_metrics("squad_v1") == ["exact_match", "f1"]
    assert board.column_metrics("wnut17") == ["entity_f1", "token_accuracy"]  # not strict-mode, not test keys
    assert board.column_metrics("upos") == ["token_accuracy"]
    assert full.cells["wnut17"].score.mean == pytest.approx(0.30)
    assert lora.cells["squad_v1"].score.mean == pytest.approx(0.325)
    compared = compare_rows(board, r_label(full), r_label(lora))
    assert [c["task"] for c in compared] == ["squad_v1"]  # per task only: no average to compare
    assert compared[0]["diff"] == pytest.approx(100 * (0.55 - 0.325))
    text = render_table(board)
    assert "SQuAD" not in text.splitlines()[0] and "avg" not in text.splitlines()[0]
    assert "em/f1" in text.splitlines()[0] and "45.0±7.1/55.0±7.1 (n=2)" in text
    # GLUE's board shows every task, each scored the same way, and only GLUE's in its average
    glue = build_leaderboard(rows())
    glue_full = next(r for r in glue.rows if r.config["adaptation"] == "full")
    assert glue_full.glue_average == pytest.approx(0.80) and glue_full.glue_tasks == 1
    assert glue_full.cells["wmt16_en_ro"].metrics["bleu"].mean == pytest.approx(0.22)


def test_the_generation_board_reads_bleu_and_rouge_from_their_scale():
    board = build_leaderboard(rows(), benchmark="generation", own_tasks=True)
    assert board.tasks == ["dialogsum", "wmt16_en_ro"]
    full = next(r for r in board.rows if r.config["adaptation"] == "full")
    lora = next(r for r in board.rows if r.config["adaptation"] == "lora")
    mt = full.cells["wmt16_en_ro"]
    assert mt.score.mean == pytest.approx(0.22) and mt.metrics["chrf"].mean == pytest.approx(0.46)
    assert full.cells["dialogsum"].score.mean == pytest.approx(0.25)  # its main metric: ROUGE-L
    assert board.column_metrics("dialogsum") == ["bleu", "rouge1", "rouge2", "rougeL", "rougeLsum"]
    assert board.column_metrics("wmt16_en_ro") == ["bleu", "chrf"]  # length_ratio stays on the job page
    assert lora.cells["wmt16_en_ro"].score.mean == pytest.approx(0.10)  # the legacy row, placed by its numbers
    table = render_csv(board)
    first = next(r for r in csv.DictReader(io.StringIO(table)) if r["adaptation"] == "full")
    assert float(first["wmt16_en_ro/bleu/mean"]) == pytest.approx(22.0) and "generation/average" not in first
    latex = render_latex(board)
    assert "BLEU/chrF" in latex and "\\mathbf{22.0}" in latex and "Generation" not in latex and "as sacreBLEU" in latex


def test_ptmlab_results_generation_and_tasks(tmp_path, capsys):
    from test_leaderboard import make_results_db

    from ptmlab.cli import main

    url = make_results_db(tmp_path / "ptmlab.db", rows())

    def cli(*args) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as done:
            main(["results", *args])
        out = capsys.readouterr()
        return done.value.code, out.out, out.err

    code, out, _ = cli("generation", "--database-url", url)
    header = out.splitlines()[0].split()
    assert code == 0 and header[3:7] == ["dialogsum", "BLEU/R-1/R-2/R-L/R-Lsum", "wmt16_en_ro", "BLEU/chrF"]
    assert "22.0±2.8/46.0±1.4 (n=2)" in out and "10.0/30.0 (n=1)" in out and "avg" not in out
    code, out, _ = cli("tasks", "--database-url", url, "--format", "csv")
    table = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [r["adaptation"] for r in table] == ["full", "lora"]
    assert float(table[0]["wnut17/entity_f1/mean"]) == pytest.approx(30.0) and "copa/n" not in table[0]
    code, out, err = cli("generation", "--database-url", make_results_db(tmp_path / "glue.db", rows()[6:7]))
    assert code == 0 and out == "" and err.strip() == "no finetune results of tasks of kind generation"
    code, out, err = cli("generaton", "--database-url", url)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "invalid choice: 'generaton'" in err


def test_the_api_boards_and_the_page_view(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from ptmlab.api.app import create_app
    from ptmlab.db import dispose_engines, session_scope
    from ptmlab.results import clear_cache, new_result
    from ptmlab.settings import Settings

    url = f"sqlite:///{tmp_path / 'platform.db'}"
    monkeypatch.setenv("PTMLAB_HOME", str(tmp_path / "home"))
    clear_cache()
    try:
        with TestClient(create_app(Settings(home=tmp_path / "home", database_url=url))) as client:
            with session_scope(url) as s:
                s.add_all([new_result(r) for r in rows()])
            gen = client.get("/api/v1/results/generation").json()
            assert gen["benchmark"] == {"name": "generation", "display_name": "Generation", "averaged": False}
            assert [(t["task"], t["kind"], t["metric_labels"]) for t in gen["tasks"]] == [
                ("dialogsum", "generation", ["BLEU", "R-1", "R-2", "R-L", "R-Lsum"]),
                ("wmt16_en_ro", "generation", ["BLEU", "chrF"]),
            ]
            full = next(r for r in gen["rows"] if r["config"]["adaptation"] == "full")
            assert full["cells"]["wmt16_en_ro"]["mean"] == pytest.approx(22.0) and full["average"] is None
            tasks = client.get("/api/v1/views/leaderboard", params={"benchmark": "tasks"}).json()
            assert [t["task"] for t in tasks["tasks"]] == ["squad_v1", "upos", "wnut17", "multiple_choice"]
            label = "t5_tiny / span_corruption / "
            compared = client.get(
                "/api/v1/views/leaderboard/compare",
                params={"a": label + "full", "b": label + "lora", "benchmark": "tasks"},
            ).json()["comparisons"]
            assert [c["task"] for c in compared] == ["squad_v1"]
            latex = client.get("/api/v1/views/leaderboard", params={"benchmark": "generation", "format": "latex"})
            assert "generation_leaderboard.tex" in latex.headers["content-disposition"] and "BLEU/chrF" in latex.text
            for path in ("/api/v1/results/squad", "/api/v1/views/leaderboard?benchmark=squad"):
                bad = client.get(path)
                assert bad.status_code == 422, path
                assert (
                    bad.json()["error"]["message"]
                    == "benchmark=squad is unknown; valid: glue, superglue, tasks, generation"
                )
    finally:
        clear_cache()
        dispose_engines()


def test_the_compression_view_names_its_axis_by_the_tasks_main_metric(tmp_path):
    from ptmlab.contracts.summaries import CompressSummary, Measurement
    from ptmlab.db import dispose_engines, migrate, session_scope
    from ptmlab.results import clear_cache, new_result
    from ptmlab.views import compression_view

    def compressed(task: str, metric: str, score: float, source_score: float, params: int, latency: float) -> dict:
        return CompressSummary(
            seed=1,
            wall_time_s=1.0,
            method="quantize_dynamic",
            source_ref=f"job:{task}",
            task=task,
            main_metric=metric,
            compressed=Measurement(score=score, params=params, size_bytes=4 * params, latency_ms=latency),
            source=Measurement(score=source_score),
        ).model_dump(exclude_none=True)

    url = f"sqlite:///{tmp_path / 'platform.db'}"
    migrate(url)
    clear_cache()
    try:
        with session_scope(url) as s:
            s.add_all(
                [
                    new_result(r)
                    for r in (
                        compressed("wmt16_en_ro", "bleu", 21.0, 24.0, 100, 9.0),  # sacreBLEU's 0-100
                        compressed("wmt16_en_ro", "bleu", 18.0, 24.0, 50, 5.0),
                        compressed("wmt16_en_ro", "bleu", 17.0, 24.0, 60, 6.0),  # dominated: bigger and worse
                        compressed("dialogsum", "rougeL", 20.0, 25.0, 100, 9.0),
                        compressed("sst2", "accuracy", 0.85, 0.9, 100, 2.0),
                    )
                ]
            )
            s.commit()
            mt = compression_view(s, task="wmt16_en_ro")
            assert (mt["metric"], mt["metric_label"], mt["metric_scale"]) == ("bleu", "BLEU", "0-100")
            by_score = {p["score"]: p for p in mt["points"]}
            assert by_score[21.0]["retention"] == pytest.approx(21 / 24)
            assert by_score[21.0]["pareto"]["params"] and by_score[18.0]["pareto"]["params"]
            assert not by_score[17.0]["pareto"]["params"]
            summ = compression_view(s, task="dialogsum")
            assert (summ["metric_label"], summ["metric_scale"]) == ("ROUGE-L", "0-100")
            glue = compression_view(s, task="sst2")
            assert (glue["metric"], glue["metric_label"], glue["metric_scale"]) == ("accuracy", "accuracy", "0-1")
    finally:
        clear_cache()
        dispose_engines()

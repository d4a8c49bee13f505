"""`ptmlab results robustness`: attack results from the platform database as a table, CSV or
LaTeX, one row per attacked model and recipe, sorted so a model's recipes sit together."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ptmlab.cli.results_compression import render_rows
from ptmlab.cli.results_robustness import COLUMNS, table_rows
from ptmlab.contracts.summaries import AttackSummary


def attack_summary(source: str, recipe: str, clean: float, under: float, **extra) -> dict:
    return {
        "stage": "attack",
        "seed": 42,
        "wall_time_s": 10.0,
        "recipe": recipe,
        "source": source,
        "task": "sst2",
        "num_examples": 50,
        "constraints": {"max_queries": None},
        "clean_accuracy": clean,
        "accuracy_under_attack": under,
        "success_rate": round(1 - under / clean, 4),
        "perturbed_word_ratio": 0.12,
        "queries": 80.5,
        "seconds_per_example": 1.5,
        **extra,
    }


SUMMARIES = [
    attack_summary("runs/int8", "pwws", 0.78, 0.10),
    attack_summary("runs/full", "pwws", 0.80, 0.08),
    attack_summary("runs/full", "deepwordbug", 0.80, 0.12),
]


def test_rows_group_a_models_recipes_and_give_the_drop():
    rows = table_rows([AttackSummary.model_validate(s) for s in SUMMARIES])
    assert [(r["source"], r["recipe"]) for r in rows] == [
        ("runs/full", "deepwordbug"),
        ("runs/full", "pwws"),
        ("runs/int8", "pwws"),
    ]
    assert rows[0]["drop"] == pytest.approx(0.68)
    csv = render_rows(rows, "csv", columns=COLUMNS).splitlines()
    assert csv[0].startswith("model,task,recipe,examples,seed,clean,under attack,drop,success")
    assert csv[1].startswith("runs/full,sst2,deepwordbug,50,42,0.8000,0.1200,0.6800")
    latex = render_rows(rows, "latex", columns=COLUMNS)
    assert latex.startswith("\\begin{tabular}") and "deepwordbug" in latex


def test_the_command_reads_the_platform_database(tmp_path):
    from ptmlab.db import dispose_engines, session_scope
    from ptmlab.results import record_result

    url = f"sqlite:///{tmp_path / 'platform.db'}"
    with session_scope(url) as s:
        for summary in SUMMARIES:
            record_result(s, summary)
    dispose_engines()
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "results", "robustness", "--database-url", url, "--recipe", "pwws"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["model", "task", "recipe"] and len(lines) == 4  # header, rule, 2 rows
    assert "runs/full" in lines[2] and "runs/int8" in lines[3] and "deepwordbug" not in proc.stdout


def test_pipeline_keeps_one_pipelines_attack_jobs(db_url, tmp_path, capsys):
    """`--pipeline <id>`: the robustness page's pipeline filter (seeded as in test_robustness_view:
    robustness_adaptation attacks full, freelb and lora once each, robustness_compressed six times);
    an unknown pipeline is one line, exit 2."""
    from test_robustness_view import seed_robustness

    from ptmlab.cli import main
    from ptmlab.results import clear_cache

    clear_cache()
    ids, pipes = seed_robustness(db_url, tmp_path / "home")

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exit_:
            main(["results", "robustness", "--database-url", db_url, "--format", "csv", *args])
        out, err = capsys.readouterr()
        return exit_.value.code, out, err

    code, out, _ = run("--pipeline", pipes["robustness_adaptation"])
    sources = [line.split(",")[0] for line in out.splitlines()[1:]]
    assert code == 0 and sorted(sources) == sorted(
        str(tmp_path / "home" / "jobs" / str(ids[n]) / "run") for n in ("full", "freelb", "lora")
    )
    code, out, _ = run("--pipeline", pipes["robustness_compressed"], "--recipe", "pwws")
    assert code == 0 and len(out.splitlines()) == 1 + 2  # the teacher's and int8's pwws results
    code, out, err = run("--pipeline", "nosuchpipe")
    assert code == 2 and out == "" and err.strip().splitlines() == ["error[not_found]: pipeline nosuchpipe not found"]

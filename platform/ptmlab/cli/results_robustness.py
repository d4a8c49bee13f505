"""`ptmlab results robustness [--format table|csv|latex] [--task T] [--recipe R] [--pipeline ID]`: one row per
attack result (stage=attack, `ptmlab.contracts.AttackSummary`), grouped by attacked model then
recipe: clean accuracy, accuracy under attack, the drop, success rate, mean perturbed-word
ratio, queries per attacked example, the sample size and seed, so models (a source, its int8 or
distilled student, each adaptation mode) compare under the same attack and sample. `--pipeline`
keeps one pipeline's attack jobs, as the robustness page's pipeline filter does
(`ptmlab.views.robustness.pipeline_rows`); an unknown pipeline is one line, exit 2."""

from __future__ import annotations

import argparse
import sys

from ptmlab.cli.results_compression import render_rows
from ptmlab.contracts.summaries import AttackSummary

COLUMNS = [  # (header, key, format)
    ("model", "source", "s"),
    ("task", "task", "s"),
    ("recipe", "recipe", "s"),
    ("examples", "num_examples", "d"),
    ("seed", "seed", "d"),
    ("clean", "clean_accuracy", ".4f"),
    ("under attack", "accuracy_under_attack", ".4f"),
    ("drop", "drop", ".4f"),
    ("success", "success_rate", ".4f"),
    ("perturbed ratio", "perturbed_word_ratio", ".4f"),
    ("queries", "queries", ".1f"),
    ("s/example", "seconds_per_example", ".3f"),
]


def table_rows(summaries: list[AttackSummary]) -> list[dict]:
    """Each attack summary's values, sorted by model, task, recipe (the order they ran within one)."""
    rows = []
    for k, s in enumerate(summaries):
        values = {key: getattr(s, key) for _, key, _ in COLUMNS if key != "drop"}
        rows.append((s.source, s.task, s.recipe, k, {**values, "drop": s.clean_accuracy - s.accuracy_under_attack}))
    return [row for *_, row in sorted(rows, key=lambda r: r[:4])]


def _cmd(args: argparse.Namespace) -> int:
    from ptmlab.contracts.summaries import validate_summary
    from ptmlab.results import read_rows

    # Each row through the contract the worker checked when it was written (a broken row: one line, exit 2).
    rows = read_rows(args.database_url, kind="attack", sweep_id=args.sweep)
    if args.pipeline is not None:
        rows = _pipeline_rows(args.database_url, rows, args.pipeline)
    summaries: list[AttackSummary] = [
        s
        for s in (validate_summary(r.summary) for r in rows)
        if (args.task is None or s.task == args.task) and (args.recipe is None or s.recipe == args.recipe)
    ]
    if not summaries:
        where = "".join(
            f" in {what} {value}" for what, value in (("sweep", args.sweep), ("pipeline", args.pipeline)) if value
        )
        print("no attack results" + where, file=sys.stderr)
        return 0
    text = render_rows(table_rows(summaries), args.format, columns=COLUMNS)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {args.output} ({len(summaries)} attack results)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _pipeline_rows(database_url: str | None, rows: list, pipeline_id: str) -> list:
    from ptmlab.db import session_scope
    from ptmlab.settings import get_settings
    from ptmlab.views.robustness import pipeline_rows

    with session_scope(database_url or get_settings().resolved_database_url) as session:
        return pipeline_rows(session, rows, pipeline_id)  # NotFoundError: one line, exit 2


def register(results_sub: argparse._SubParsersAction) -> None:
    p = results_sub.add_parser("robustness", help="attack results: accuracy under attack per recipe, per model")
    p.add_argument("--format", choices=("table", "csv", "latex"), default="table")
    p.add_argument("--task", default=None, help="only results of this task")
    p.add_argument("--recipe", default=None, help="only results of this attack recipe")
    p.add_argument("--sweep", default=None, help="only results of this sweep id")
    p.add_argument("--pipeline", default=None, help="only results of this pipeline's attack jobs (its id)")
    p.add_argument("--output", "-o", default=None, help="write to this file instead of stdout")
    p.add_argument("--database-url", default=None, help="default: the platform database (PTMLAB_DATABASE_URL)")
    p.set_defaults(func=_cmd)

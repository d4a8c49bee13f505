"""`ptmlab results glue|superglue|tasks|generation`: a benchmark's leaderboard of finetune results
(table, CSV or LaTeX; the benchmarks are ptmlab.contracts.benchmarks' table), with each
configuration's trainable parameters and per-task delta size, optionally of some adaptation modes.
The GLUE table shows every task; the others their own: SuperGLUE's named tasks with their average,
`tasks` SQuAD-style QA (EM/F1), tagging (entity F1, token accuracy) and multiple choice (accuracy),
`generation` BLEU/chrF and ROUGE-1/2/L/Lsum, each task scored by its main metric, without an average.

Other result tables (`ptmlab results compression`, `... probing`, `... robustness`) live in their own modules, listed
in TABLE_MODULES, each with a `register(results_subparsers)` function."""

from __future__ import annotations

import argparse
import importlib
import sys

from ptmlab.errors import ConfigError

TABLE_MODULES: list[str] = [
    "ptmlab.cli.results_compression",
    "ptmlab.cli.results_probing",
    "ptmlab.cli.results_robustness",
    "ptmlab.cli.results_runs",
]


def _cmd_benchmark(args: argparse.Namespace) -> int:
    from ptmlab.contracts.benchmarks import BENCHMARKS
    from ptmlab.leaderboard.grouping import LEADERBOARD_KINDS, build_leaderboard, parse_adaptation_filter
    from ptmlab.leaderboard.rendering import render
    from ptmlab.results import read_rows

    modes = parse_adaptation_filter(None if args.adaptation is None else ",".join(args.adaptation))
    rows = read_rows(args.database_url, kind=LEADERBOARD_KINDS, sweep_id=args.sweep)
    group_by = [k.strip() for v in args.group_by for k in v.split(",") if k.strip()]
    if rows:  # a rows-by key no run has would put every run in one "-" row: refused naming it
        from ptmlab.contracts.summaries import FinetuneSummary
        from ptmlab.views.runs import refuse_unknown, row_keys

        refuse_unknown(group_by, row_keys(rows) | set(FinetuneSummary.model_fields), "--group-by")
    bench = BENCHMARKS[args.benchmark]
    board = build_leaderboard(
        rows,
        group_by=group_by,
        adaptations=modes,
        benchmark=args.benchmark,
        own_tasks=not bench.every_task,
        pool=args.pool,
    )
    if not board.rows:
        where = f" in sweep {args.sweep}" if args.sweep else ""
        where += f" of adaptation {', '.join(modes)}" if modes else ""
        where += "" if bench.every_task else f" of {bench.description()}"
        print(f"no finetune results{where}", file=sys.stderr)
        return 0
    if args.compare:
        from ptmlab.leaderboard.grouping import compare_rows
        from ptmlab.leaderboard.rendering import render_comparison

        text = render_comparison(*args.compare, compare_rows(board, *args.compare), args.format)
    else:
        text = render(board, args.format)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {args.output} ({len(board.rows)} configurations, {len(board.tasks)} tasks)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _one_line_error(prog: str):
    """An unknown table (`ptmlab results glu`) is one line and exit 2, without argparse's usage line."""

    def error(message: str):
        print(f"error[{ConfigError.code}]: {prog}: {message}", file=sys.stderr)
        sys.exit(2)

    return error


def register(sub: argparse._SubParsersAction) -> None:
    from ptmlab.contracts.benchmarks import BENCHMARKS

    names = "|".join(BENCHMARKS)
    p = sub.add_parser("results", help=f"result tables: ptmlab results {names} [--format table|csv|latex]")
    p.error = _one_line_error(p.prog)
    results_sub = p.add_subparsers(dest="results_command", required=True)
    for benchmark, bench in BENCHMARKS.items():
        g = results_sub.add_parser(
            benchmark, help=f"{bench.display_name} leaderboard: mean ± std over seeds per configuration"
        )
        g.add_argument("--format", choices=("table", "csv", "latex"), default="table")
        g.add_argument("--sweep", default=None, help="only results of this sweep id")
        g.add_argument(
            "--adaptation",
            nargs="+",
            default=None,
            metavar="MODE",
            help="only these adaptation modes (space or comma separated: --adaptation lora bitfit)",
        )
        g.add_argument(
            "--group-by",
            nargs="+",
            default=["model", "objective", "adaptation"],
            help="summary or config keys (stage.lr) that label a row (default: model objective adaptation)",
        )
        g.add_argument(
            "--pool",
            action="store_true",
            help="one row per --group-by value even where its runs differ in other config keys "
            "(their spread is then over runs, not seeds)",
        )
        g.add_argument(
            "--compare",
            nargs=2,
            default=None,
            metavar=("A", "B"),
            help="two rows (their labels: 'bert_tiny / mlm / full') compared per task over their seeds: "
            "an interval and p only with ≥ 3 seeds a side (paired t-test over common seeds, Welch "
            "otherwise)",
        )
        g.add_argument("--output", "-o", default=None, help="write to this file instead of stdout")
        g.add_argument("--database-url", default=None, help="default: the platform database (PTMLAB_DATABASE_URL)")
        g.set_defaults(func=_cmd_benchmark, benchmark=benchmark)
    for name in TABLE_MODULES:
        importlib.import_module(name).register(results_sub)

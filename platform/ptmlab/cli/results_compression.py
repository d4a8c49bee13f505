"""`ptmlab results compression [--format table|csv|latex]`: the compression trade-off table,
one row per compress result (oldest first) after its source: method, task, score, retention
(against the source, against the control of a method that trained, or marked "with extra
training" when it had none), parameters, size ratio, FLOPs ratio, headline latency and speed-up, with the measurement
settings, the same numbers the dashboard's compression page plots. bench/compression.py prints
its side-by-side measurements with `render_rows` too."""

from __future__ import annotations

import argparse
import csv
import io
import sys

from ptmlab.contracts.summaries import CompressSummary, Measurement
from ptmlab.results import number

COLUMNS = [  # (header, key, format)
    ("method", "method", "s"),
    ("task", "task", "s"),
    ("source", "source", "s"),
    ("score", "score", ".4f"),
    ("source score", "source_score", ".4f"),
    ("retention", "retention", ".4f"),
    ("params", "params", ",d"),
    ("nonzero", "nonzero_params", ",d"),
    ("size ratio", "size_ratio", ".4f"),
    ("non-emb size ratio", "non_embedding_size_ratio", ".4f"),
    ("FLOPs ratio", "flops_ratio", ".4f"),
    ("latency ms", "latency_ms", ".2f"),
    ("source latency ms", "source_latency_ms", ".2f"),
    ("speed-up", "speedup", ".2f"),
    ("control", "control_score", ".4f"),
    ("retention vs control", "retention_vs_control", ".4f"),
    ("with extra training", "with_extra_training", "s"),
    ("measured", "measured", "s"),
]


def table_rows(summaries: list[CompressSummary]) -> list[dict]:
    """The table's values of each compress summary (the headline latency setting's speed-up)."""
    rows = []
    for s in summaries:
        headline = s.headline_latency or ""
        m = s.measurement
        measured = f"{headline} seq {m.seq_len} x{m.repeats} {m.device}" if m is not None else ""
        source = s.source or Measurement()
        rows.append(
            {
                **{key: getattr(s, key, None) for _, key, _ in COLUMNS},
                "source": s.source_ref,
                **{key: getattr(s.compressed, key) for key in ("score", "params", "nonzero_params", "latency_ms")},
                "source_score": source.score,
                "source_latency_ms": source.latency_ms,
                "speedup": (s.speedup or {}).get(headline),
                "measured": measured.strip(),
                # no control trained: the retention mixes compression with the extra training
                "with_extra_training": "yes" if s.retention_with_extra_training else None,
            }
        )
    return rows


def _cell(value, fmt: str) -> str:
    if value is None or value == "":
        return "-"
    if fmt == "s":
        return str(value)
    n = number(value)
    if n is None:
        return "-"
    return format(int(n), fmt) if fmt.endswith("d") else format(n, fmt)


def render_rows(rows: list[dict], fmt: str = "table", columns=COLUMNS) -> str:
    header = [h for h, _, _ in columns]
    cells = [[_cell(r.get(key), f) for _, key, f in columns] for r in rows]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        w.writerows(
            [
                ["" if c == "-" else c.replace(",", "") if f.endswith("d") else c for c, (_, _, f) in zip(row, columns)]
                for row in cells
            ]
        )
        return buf.getvalue()
    if fmt == "latex":
        from ptmlab.leaderboard.rendering import latex_text

        lines = [
            f"\\begin{{tabular}}{{{'l' * 3}{'r' * (len(columns) - 3)}}}",
            "\\toprule",
            " & ".join(latex_text(h) for h in header) + " \\\\",
            "\\midrule",
        ]
        lines += [" & ".join(latex_text(c) for c in row) + " \\\\" for row in cells]
        return "\n".join([*lines, "\\bottomrule", "\\end{tabular}"]) + "\n"
    widths = [max(len(x) for x in col) for col in zip(header, *cells)]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *cells]]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


def _cmd(args: argparse.Namespace) -> int:
    from ptmlab.contracts.summaries import validate_summary
    from ptmlab.results import read_rows

    # Each row through the contract the worker checked when it was written (a broken row: one line, exit 2).
    rows = read_rows(args.database_url, kind="compress", sweep_id=args.sweep)
    summaries: list[CompressSummary] = [
        s for s in (validate_summary(r.summary) for r in rows) if args.task is None or s.task == args.task
    ]
    if not summaries:
        print("no compress results" + (f" in sweep {args.sweep}" if args.sweep else ""), file=sys.stderr)
        return 0
    text = render_rows(table_rows(summaries), args.format)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {args.output} ({len(summaries)} compress results)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def register(results_sub: argparse._SubParsersAction) -> None:
    p = results_sub.add_parser("compression", help="compression trade-offs: score, retention, size, latency")
    p.add_argument("--format", choices=("table", "csv", "latex"), default="table")
    p.add_argument("--task", default=None, help="only results of this task")
    p.add_argument("--sweep", default=None, help="only results of this sweep id")
    p.add_argument("--output", "-o", default=None, help="write to this file instead of stdout")
    p.add_argument("--database-url", default=None, help="default: the platform database (PTMLAB_DATABASE_URL)")
    p.set_defaults(func=_cmd)

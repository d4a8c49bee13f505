"""`ptmlab results probing [--format table|csv] [--task T] [--model M] [--sweep S]`: one row per
probe result × task (oldest first): the best layer and its score, the baselines it is read
against (layer 0, the random-init model's best layer, the majority class), selectivity at the
best layer next to the random-init model's, the scalar mix, and the per-layer curve; LAMA tasks
show P@1 / P@10 / MRR and the out-of-vocabulary objects left out. The same numbers the
dashboard's probing page draws."""

from __future__ import annotations

import argparse
import csv
import io
import sys

from ptmlab.results import number

COLUMNS = [  # (header, key)
    ("#", "result"),
    ("model", "model"),
    ("suite", "suite"),
    ("task", "task"),
    ("metric", "metric"),
    ("best layer", "best_layer"),
    ("best", "best_score"),
    ("layer 0", "layer0"),
    ("random init", "random_init_best"),
    ("majority", "majority"),
    ("selectivity", "best_selectivity"),
    ("random sel.", "random_init_selectivity"),
    ("scalar mix", "scalar_mix"),
    ("per layer", "curve"),
]


def _fmt(value) -> str:
    n = number(value)
    if value is None or value == "":
        return "-"
    if isinstance(value, str) or n is None:
        return str(value)
    return str(int(n)) if isinstance(value, int) else f"{n:.4f}"


def table_rows(results: list[tuple[int, dict]]) -> list[dict]:
    """(row number, probe summary) -> one row per task of each summary."""
    rows = []
    for result_id, s in results:
        tasks = s.get("tasks") or [
            {
                "probe_task": s.get("probe_task"),
                "metric": s.get("metric"),
                "layers": s.get("layers") or [],
                "baselines": s.get("baselines") or {},
            }
        ]
        for t in tasks:
            metric = t.get("metric")
            baselines = t.get("baselines") or {}
            layers = t.get("layers") or []
            curve = " ".join(_fmt(e.get(metric)) for e in layers) if metric else ""
            row = {
                "result": result_id,
                "model": s.get("model"),
                "suite": s.get("suite") or s.get("probe_task"),
                "task": t.get("probe_task"),
                "metric": metric,
                "best_layer": t.get("best_layer"),
                "best_score": t.get("best_score"),
                "layer0": baselines.get("layer0"),
                "random_init_best": baselines.get("random_init_best"),
                "majority": baselines.get("majority"),
                "best_selectivity": t.get("best_selectivity"),
                "random_init_selectivity": baselines.get("random_init_selectivity"),
                "scalar_mix": (t.get("scalar_mix") or {}).get("accuracy"),
                "curve": curve,
            }
            if t.get("family") == "cloze":
                row["curve"] = (
                    f"P@1 {_fmt(t.get('p_at_1'))} P@10 {_fmt(t.get('p_at_10'))} MRR {_fmt(t.get('mrr'))} "
                    f"scored {t.get('scored')} oov {t.get('oov')}"
                )
            if t.get("family") == "attention":
                best = (t.get("best_heads") or {}).get("all") or {}
                row["curve"] = (
                    f"dep-arc best head L{best.get('layer')}H{best.get('head')} {_fmt(best.get('accuracy'))}"
                    if best
                    else ""
                )
            rows.append(row)
    return rows


def render_rows(rows: list[dict], fmt: str = "table") -> str:
    header = [h for h, _ in COLUMNS]
    cells = [[_fmt(r.get(key)) for _, key in COLUMNS] for r in rows]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([["" if c == "-" else c for c in row] for row in cells])
        return buf.getvalue()
    widths = [max(len(x) for x in col) for col in zip(header, *cells)]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *cells]]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


def _cmd(args: argparse.Namespace) -> int:
    from ptmlab.contracts.summaries import validate_summary
    from ptmlab.results import read_rows

    results = list(
        enumerate((r.summary for r in read_rows(args.database_url, kind="probe", sweep_id=args.sweep)), start=1)
    )
    for _, s in results:
        validate_summary(s)  # the contract the worker checked when the row was written
    rows = [
        r
        for r in table_rows(results)
        if (args.task is None or r["task"] == args.task) and (args.model is None or r["model"] == args.model)
    ]
    if not rows:
        print("no probe results" + (f" in sweep {args.sweep}" if args.sweep else ""), file=sys.stderr)
        return 0
    sys.stdout.write(render_rows(rows, args.format))
    return 0


def register(results_sub: argparse._SubParsersAction) -> None:
    p = results_sub.add_parser("probing", help="probe results: best layer, baselines, selectivity, per-layer curve")
    p.add_argument("--format", choices=("table", "csv"), default="table")
    p.add_argument("--task", default=None, help="only this probe task (upos, distance, lama, ...)")
    p.add_argument("--model", default=None, help="only this model")
    p.add_argument("--sweep", default=None, help="only results of this sweep id")
    p.add_argument("--database-url", default=None, help="default: the platform database (PTMLAB_DATABASE_URL)")
    p.set_defaults(func=_cmd)

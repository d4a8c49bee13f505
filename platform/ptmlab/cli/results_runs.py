"""`ptmlab results runs`: the runs table of the dashboard on the command line — any summary or
config key as a column (`--columns main_score,stage.lr`), filters (`--filter 'stage.epochs>=3'`),
a sort, and `--group-by stage.lr`: one row per value with mean ± std, n, min and max over its
runs, and whether that spread is over seeds or over runs of different configs. The numbers are
the view's (ptmlab.views.runs), so the page, `GET /api/v1/views/runs` and this command agree. An
unknown key is one line naming it, exit 2."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys

from ptmlab.leaderboard.rendering import latex_text


def _number(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _stat(stat: dict | None) -> str:
    if not stat:
        return "–"
    if "mean" in stat:
        return _number(stat["mean"]) + ("" if stat["std"] is None else f" ± {_number(stat['std'])}")
    return stat.get("value") or f"{len(stat['values'])} values"


def table_of(view: dict) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the view: its runs, or its groups when it was grouped."""
    columns = view["columns"]
    if "groups" not in view:
        return ["run", *columns], [[r["label"], *(_number(r["values"].get(c)) for c in columns)] for r in view["rows"]]
    keys = view["group_by"]
    shown = [c for c in columns if c not in keys]
    header = [*keys, "n", *shown, "spread", "runs"]
    rows = []
    for g in view["groups"]:
        spread = "seeds" if g["spread"] == "seeds" else f"runs ({', '.join(g['varying'])} differ)"
        rows.append([*(_number(g["key"].get(k)) for k in keys), str(g["n"]), *(_stat(g["values"].get(c)) for c in shown),
                     spread + (f", {g['degenerate']} degenerate" if g["degenerate"] else ""), " ".join(g["labels"])])
    return header, rows


def render(view: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps({k: view[k] for k in ("columns", "rows", "group_by", "groups", "group_total", "total")
                           if k in view}, indent=1, default=str) + "\n"
    header, rows = table_of(view)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
        return buf.getvalue()
    if fmt == "latex":
        lines = [f"\\begin{{tabular}}{{{'l' * len(header)}}}", "\\toprule", " & ".join(map(latex_text, header)) + " \\\\",
                 "\\midrule", *(" & ".join(map(latex_text, r)) + " \\\\" for r in rows), "\\bottomrule", "\\end{tabular}"]
        note = "\\par\\footnotesize mean $\\pm$ sample std over each group's runs (n runs; the spread column says " \
               "whether they differ only in their seed)." if "groups" in view else ""
        return "\n".join(lines + ([note] if note else [])) + "\n"
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


def _keys(values: list[str] | None) -> list[str]:
    return [k.strip() for v in values or [] for k in v.split(",") if k.strip()]


def _cmd(args: argparse.Namespace) -> int:
    from ptmlab.db import session_scope
    from ptmlab.views.runs import runs_view

    group_by = _keys(args.group_by)
    columns = _keys(args.columns) or None
    with session_scope(args.database_url) as session:
        view = runs_view(session, kind=args.kind, filters=args.filter, sort=args.sort, order=args.order,
                         columns=columns, limit=args.limit, group_by=group_by)
    sys.stdout.write(render(view, args.format))
    return 0


def register(results_sub: argparse._SubParsersAction) -> None:
    p = results_sub.add_parser("runs", help="every result as a row; any summary or config key as a column, "
                                            "filter, sort or group (mean ± std over the group's runs)")
    p.add_argument("--kind", default=None, help="only results of this stage (finetune, compress, probe ...)")
    p.add_argument("--columns", nargs="+", default=None, metavar="KEY", help="columns: main_score stage.lr ...")
    p.add_argument("--filter", action="append", default=None, metavar="EXPR",
                   help="<key><op><value>, op = != > >= < <= ~ (contains); repeat for several")
    p.add_argument("--group-by", nargs="+", default=None, metavar="KEY", help="one row per value of these keys")
    p.add_argument("--sort", default="id", help="a column (grouped: by its mean)")
    p.add_argument("--order", choices=("asc", "desc"), default="desc")
    p.add_argument("--limit", type=int, default=500, help="rows (or groups) shown, at most 500")
    p.add_argument("--format", choices=("table", "csv", "latex", "json"), default="table")
    p.add_argument("--database-url", default=None, help="default: the platform database (PTMLAB_DATABASE_URL)")
    p.set_defaults(func=_cmd)

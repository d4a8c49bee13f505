"""The runs table (ptmlab.views.runs) as text: a plain table, CSV, LaTeX or JSON, for `ptmlab
results runs` and `GET /api/v1/views/runs?format=csv|latex`. A grouped table states, beside each
group's figures, its n and what its ± is over (seeds, or runs of different configs naming the keys
that differ) and any runs at or below the majority-class baseline."""

from __future__ import annotations

import csv
import io
import json

from ptmlab.leaderboard.rendering import latex_text

FORMATS = ("table", "csv", "latex", "json")


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
        spread = (
            f"std over {g['n']} seeds"
            if g["spread"] == "seeds"
            else f"std over {g['n']} runs ({', '.join(g['varying'])} differ)"
        )
        degenerate = (
            f"; {g['degenerate']} at or below the majority-class baseline {_number(g['baseline'])}"
            if g["degenerate"]
            else ""
        )
        rows.append(
            [
                *(_number(g["key"].get(k)) for k in keys),
                str(g["n"]),
                *(_stat(g["values"].get(c)) for c in shown),
                spread + degenerate,
                " ".join(g["labels"]),
            ]
        )
    return header, rows


def render(view: dict, fmt: str) -> str:
    if fmt == "json":
        return (
            json.dumps(
                {k: view[k] for k in ("columns", "rows", "group_by", "groups", "group_total", "total") if k in view},
                indent=1,
                default=str,
            )
            + "\n"
        )
    header, rows = table_of(view)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
        return buf.getvalue()
    if fmt == "latex":
        lines = [
            f"\\begin{{tabular}}{{{'l' * len(header)}}}",
            "\\toprule",
            " & ".join(map(latex_text, header)) + " \\\\",
            "\\midrule",
            *(" & ".join(map(latex_text, r)) + " \\\\" for r in rows),
            "\\bottomrule",
            "\\end{tabular}",
        ]
        note = (
            "\\par\\footnotesize mean $\\pm$ sample std over each group's runs (n runs; the spread column says "
            "whether they differ only in their seed)."
            if "groups" in view
            else ""
        )
        return "\n".join(lines + ([note] if note else [])) + "\n"
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"

"""A benchmark's leaderboard rendered: a plain-text table, CSV and LaTeX of a `Leaderboard`
(ptmlab.leaderboard.grouping), on a 0-100 scale, the average column named after the board's
benchmark (none for a benchmark without an average: tasks, generation). Renderers read the typed
board only."""

from __future__ import annotations

import csv
import io

from ptmlab.contracts.benchmarks import KIND_COLUMNS, KindColumns
from ptmlab.errors import ConfigError
from ptmlab.leaderboard.grouping import METRIC_ABBREV, MISSING, Footprint, Leaderboard, Stat, TaskCell, r_label

FORMATS = ("table", "csv", "latex")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def _stat_text(s: Stat) -> str:
    if s.mean is None:
        return "-"
    return _pct(s.mean) + (f"±{100 * s.std:.1f}" if s.std is not None else "")


def _cell_text(cell: TaskCell | None, metrics: list[str]) -> str:
    if cell is None:
        return ""
    # One slot per column metric, "-" where a run set lacks it (MNLI without a mismatched dev).
    text = "/".join(_stat_text(cell.metrics.get(m, Stat(None, None, 0))) for m in metrics) or "-"
    return f"{text} (n={', '.join([str(cell.score.n), *cell.marks])})" + (" !" if cell.flags else "")


FOOTPRINT_HEADERS = ("trainable", "% trainable", "delta")


def _config_cells(row) -> list[str]:
    """The row's rows-by values, the last followed by what tells it from same-valued rows."""
    cells = [str(v) for v in row.config.values()]
    if row.distinct and cells:
        cells[-1] += " · " + ", ".join(f"{k}={v}" for k, v in row.distinct.items())
    return cells


def render_table(board: Leaderboard) -> str:
    """A plain-text table: mean±std over seeds (n = runs shown, then "k runs share a seed" or
    "multi-task" where it applies), `!` marks a flagged cell; then the
    footprint: trainable parameters, their share of all, the per-task delta's size."""
    header = [*board.group_by]
    for t in board.tasks:
        metrics = "/".join(METRIC_ABBREV.get(m, m) for m in board.column_metrics(t))
        header.append(f"{board.display_name(t)} {metrics}".strip())
    averaged = board.benchmark.averaged
    header += [f"{board.benchmark.display_name} avg"] * averaged + [*FOOTPRINT_HEADERS]
    lines = [header]
    for r in board.rows:
        avg = "-" if r.average is None else f"{_pct(r.average)} ({r.average_tasks} tasks)"
        lines.append(
            [
                *_config_cells(r),
                *(_cell_text(r.cells.get(t), board.column_metrics(t)) for t in board.tasks),
                *[avg] * averaged,
                *r.footprint.texts().values(),
            ]
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    flags = [f"! {r_label(r)}: {f}" for r in board.rows for f in r.flags]
    return "\n".join(out + ([""] + flags if flags else [])) + "\n"


FOOTPRINT_CSV = ("trainable_params", "total_params", "trainable_pct", "delta_params", "delta_bytes")


def _raw(v: float | None) -> str:
    if v is None:
        return ""
    return str(int(v)) if float(v).is_integer() else f"{v:.4f}"


def render_csv(board: Leaderboard) -> str:
    """One row per configuration; per task and metric the mean and std (0-100 scale) and n; the
    footprint as raw numbers (empty where the runs did not record it)."""
    header = [*board.group_by, "distinct"]
    for t in board.tasks:
        for m in board.column_metrics(t):
            header += [f"{t}/{m}/mean", f"{t}/{m}/std"]
        header += [
            f"{t}/score/mean",
            f"{t}/score/std",
            f"{t}/n",
            f"{t}/flags",
            f"{t}/same_seed_runs",
            f"{t}/multitask_runs",
            f"{t}/spread",
            f"{t}/jobs",
        ]
    averaged = board.benchmark.averaged
    header += [f"{board.benchmark.name}/average", f"{board.benchmark.name}/tasks"] * averaged + [*FOOTPRINT_CSV]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)

    def num(v):
        return "" if v is None else f"{100 * v:.4f}"

    for r in board.rows:
        row = [*r.config.values(), "; ".join(f"{k}={v}" for k, v in r.distinct.items())]
        for t in board.tasks:
            cell = r.cells.get(t)
            for m in board.column_metrics(t):
                s = cell.metrics.get(m) if cell else None
                row += [num(s.mean), num(s.std)] if s else ["", ""]
            spread = "seeds" if not cell or cell.spread == "seeds" else f"runs ({', '.join(cell.varying)} differ)"
            row += (
                [
                    num(cell.score.mean),
                    num(cell.score.std),
                    cell.score.n,
                    "; ".join(cell.flags),
                    cell.same_seed_runs,
                    cell.multitask_runs,
                    spread,
                    " ".join(str(j) for j in cell.job_ids if j is not None),
                ]
                if cell
                else ["", "", 0, "", 0, 0, "", ""]
            )
        row += [num(r.average), r.average_tasks] * averaged
        footprint = r.footprint.as_dict()
        w.writerow(row + [_raw(footprint[k]) for k in FOOTPRINT_CSV])
    return buf.getvalue()


_LATEX_ESCAPES = {
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
}


def latex_text(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def _tex_stat(s: Stat | None, best: bool = False) -> str:
    if s is None or s.mean is None:
        return "--"
    mean = f"\\mathbf{{{_pct(s.mean)}}}" if best else _pct(s.mean)
    return f"${mean}" + (f" \\pm {100 * s.std:.1f}$" if s.std is not None else "$")


def _seed_note(board: Leaderboard) -> str:
    """The footnote: how many seeds stand behind the cells (one count when they all agree)."""
    counts = sorted({c.score.n for r in board.rows for c in r.cells.values()})
    if not counts:
        return ""
    seeds = (
        f"{counts[0]} seed{'s' if counts[0] != 1 else ''} per cell"
        if len(counts) == 1
        else f"{counts[0]}--{counts[-1]} seeds per cell: "
        + "; ".join(
            f"{latex_text(r_label(r))} {'/'.join(str(r.cells[t].score.n) if t in r.cells else '--' for t in board.tasks)}"
            for r in board.rows
        )
    )
    # BLEU, chrF and ROUGE are on their own 0-100 scale already (a generation board)
    stored_100 = board.tasks and all(
        KIND_COLUMNS.get(board.task_kinds.get(t) or "", KindColumns(())).stored_scale == 100 for t in board.tasks
    )
    scale = "Dev scores (0--100, as sacreBLEU and rouge-score print them)" if stored_100 else "Dev scores $\\times 100$"
    return (
        f"\\par\\footnotesize {scale}, mean $\\pm$ sample std over seeds ({seeds}); "
        "best per column in bold"
        + (
            "; $^\\dagger$ flagged: a degenerate run, or runs of different "
            "configurations under one seed (see the dashboard)"
            if any(r.flags for r in board.rows)
            else ""
        )
        + ("; $^\\ast$ multi-task runs" if any(c.multitask_runs for r in board.rows for c in r.cells.values()) else "")
        + (
            "; $^\\ddagger$ pooled configurations: $\\pm$ over runs, not seeds"
            if any(c.varying for r in board.rows for c in r.cells.values())
            else ""
        )
        + "."
    )


def _tex_footprint(fp: Footprint) -> str:
    text = fp.texts()
    if fp.trainable_fraction is None and fp.delta_bytes is None:
        return "--"
    return " / ".join(latex_text(text[k]) if text[k] != MISSING else "--" for k in ("trainable_pct", "delta"))


def render_latex(board: Leaderboard) -> str:
    """A booktabs table for a paper: mean ± std over seeds, the best score of each column in bold,
    the seed counts in a footnote, \\dagger on a flagged cell; a compact footprint column
    (% trainable / delta size) when any row's runs recorded one."""
    footprint = any(r.footprint != Footprint() for r in board.rows)
    averaged = board.benchmark.averaged
    cols = "l" * len(board.group_by) + "r" * (len(board.tasks) + averaged + footprint)
    head = [latex_text(k.capitalize()) for k in board.group_by]
    for t in board.tasks:
        metrics = "/".join(METRIC_ABBREV.get(m, m) for m in board.column_metrics(t))
        head.append(
            f"{latex_text(board.display_name(t))} \\tiny{{{latex_text(metrics)}}}"
            if metrics
            else latex_text(board.display_name(t))
        )
    if averaged:
        head.append(latex_text(board.benchmark.display_name))
    if footprint:
        head.append("Trainable \\tiny{\\% / delta}")
    lines = [f"\\begin{{tabular}}{{{cols}}}", "\\toprule", " & ".join(head) + " \\\\", "\\midrule"]
    # Best per column, at the precision shown (ties are all bold).
    best = {
        t: max(
            (
                round(100 * r.cells[t].score.mean, 1)
                for r in board.rows
                if t in r.cells and r.cells[t].score.mean is not None
            ),
            default=None,
        )
        for t in board.tasks
    }
    # Averages over different task sets do not compare: the best among the rows with the most tasks.
    most = max((r.average_tasks for r in board.rows), default=0)
    best_glue = max(
        (round(100 * r.average, 1) for r in board.rows if r.average is not None and r.average_tasks == most),
        default=None,
    )
    for r in board.rows:
        cells = [latex_text(v) for v in r.config.values()]
        if r.distinct:  # one configuration per row: what tells it from the rows of the same values
            cells[-1] += " \\tiny{" + latex_text(", ".join(f"{k}={v}" for k, v in r.distinct.items())) + "}"
        for t in board.tasks:
            cell = r.cells.get(t)
            if cell is None:
                cells.append("")
                continue
            top = cell.score.mean is not None and round(100 * cell.score.mean, 1) == best[t]
            text = "/".join(_tex_stat(cell.metrics.get(m), top) for m in board.column_metrics(t)) or "--"
            cells.append(
                text
                + ("$^\\dagger$" if cell.flags else "")
                + ("$^\\ast$" if cell.multitask_runs else "")
                + ("$^\\ddagger$" if cell.varying else "")
            )
        glue = "--" if r.average is None else _pct(r.average)
        top_glue = r.average is not None and r.average_tasks == most and round(100 * r.average, 1) == best_glue
        if averaged:
            cells.append(f"\\textbf{{{glue}}}" if top_glue else glue)
        if footprint:
            cells.append(_tex_footprint(r.footprint))
        lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    note = _seed_note(board)
    return "\n".join(lines + ([note] if note else [])) + "\n"


COMPARISON_CSV = (
    "task",
    "name",
    "a_n",
    "a_mean",
    "a_std",
    "b_n",
    "b_mean",
    "b_std",
    "diff",
    "diff_pct",
    "test",
    "ci_low",
    "ci_high",
    "p_value",
    "paired_seeds",
    "reason",
    "a_values",
    "b_values",
)


def _spread(values: list[float]) -> float | None:
    import statistics

    return statistics.stdev(values) if len(values) > 1 else None


def _fixed(v: float | None, digits: int = 2) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def render_comparison(label_a: str, label_b: str, comparisons: list[dict], fmt: str) -> str:
    """Two leaderboard rows compared (grouping.compare_rows) as a plain table, CSV or LaTeX: beside
    every figure its n and the test behind its interval and p-value, or why there is none."""
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["a", "b", *COMPARISON_CSV])
        for c in comparisons:
            w.writerow(
                [
                    label_a,
                    label_b,
                    c["task"],
                    c["name"],
                    c["a_n"],
                    _fixed(c["a_mean"], 4),
                    _fixed(_spread(c["a_values"]), 4),
                    c["b_n"],
                    _fixed(c["b_mean"], 4),
                    _fixed(_spread(c["b_values"]), 4),
                    _fixed(c["diff"], 4),
                    _fixed(c["diff_pct"], 2),
                    c["test"] or "",
                    _fixed(c["ci_low"], 4),
                    _fixed(c["ci_high"], 4),
                    "" if c["p_value"] is None else f"{c['p_value']:.4g}",
                    " ".join(map(str, c["paired_seeds"] or [])),
                    c["reason"] or "",
                    " ".join(f"{v:.4f}" for v in c["a_values"]),
                    " ".join(f"{v:.4f}" for v in c["b_values"]),
                ]
            )
        return buf.getvalue()
    if fmt == "table":
        header = ["task", f"A: {label_a}", f"B: {label_b}", "A - B", "95% CI", "p", "test"]
        lines = [header]
        for c in comparisons:
            std_a, std_b = _spread(c["a_values"]), _spread(c["b_values"])
            lines.append(
                [
                    c["name"],
                    f"{c['a_mean']:.2f}" + ("" if std_a is None else f"±{std_a:.2f}") + f" (n={c['a_n']})",
                    f"{c['b_mean']:.2f}" + ("" if std_b is None else f"±{std_b:.2f}") + f" (n={c['b_n']})",
                    f"{c['diff']:+.2f}",
                    "-" if c["test"] is None else f"[{c['ci_low']:.2f}, {c['ci_high']:.2f}]",
                    "-" if c["p_value"] is None else f"{c['p_value']:.3g}",
                    c["test"] or c["reason"] or "no test",
                ]
            )
        widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
        out = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in lines]
        out.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(out) + "\n"
    if fmt != "latex":
        raise ConfigError(f"format={fmt} is unknown; valid: table, csv, latex")

    def side(mean: float, values: list[float], n: int) -> str:
        std = _spread(values)
        return f"${mean:.1f}" + ("" if std is None else f" \\pm {std:.1f}") + f"$ ({n})"

    lines = [
        "\\begin{tabular}{lrrrrrl}",
        "\\toprule",
        f"Task & {latex_text(label_a)} (n) & {latex_text(label_b)} (n) & $\\Delta$ & 95\\,\\% CI & $p$ & test \\\\",
        "\\midrule",
    ]
    for c in comparisons:
        tested = c["test"] is not None
        interval = f"[{c['ci_low']:.2f}, {c['ci_high']:.2f}]" if tested else "--"
        p_value = "--" if c["p_value"] is None else (f"{c['p_value']:.3g}" if c["p_value"] >= 0.001 else "$<$0.001")
        test = latex_text(c["test"]) if tested else latex_text(c["reason"] or "no test")
        lines.append(
            " & ".join(
                [
                    latex_text(c["name"]),
                    side(c["a_mean"], c["a_values"], c["a_n"]),
                    side(c["b_mean"], c["b_values"], c["b_n"]),
                    f"${c['diff']:+.2f}$",
                    interval,
                    p_value,
                    test,
                ]
            )
            + " \\\\"
        )
    lines += [
        "\\bottomrule",
        "\\end{tabular}",
        "\\par\\footnotesize Dev scores $\\times 100$, mean $\\pm$ sample std (n seeds); $\\Delta$ = A $-$ B. "
        "An interval and $p$ only with at least 3 seeds on each side and one configuration per side: "
        "the paired $t$-test over the seeds both ran, Welch's $t$-test otherwise.",
    ]
    return "\n".join(lines) + "\n"


def render(board: Leaderboard, fmt: str = "table") -> str:
    if fmt == "table":
        return render_table(board)
    if fmt == "csv":
        return render_csv(board)
    if fmt == "latex":
        return render_latex(board)
    raise ConfigError(f"format={fmt} is unknown; valid: {', '.join(FORMATS)}")

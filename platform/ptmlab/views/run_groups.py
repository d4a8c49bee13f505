"""The runs table grouped by any of its keys (`group_by=stage.lr`): per group the members (jobs and
their seeds), each numeric column's mean ± sample std, min, max and n over them, a text column's
value (or its distinct values), and whether the spread is over seeds or over runs — a group whose
members differ in config keys besides the seed and the group keys names those keys (`varying`).
Members at or below their task's majority-class baseline are marked (`degenerate`: how many, and
the baseline they sit at)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ptmlab.results import ResultRow, is_degenerate, number, row_baseline, row_params

MISSING = "—"


def _numbers(values: list[Any]) -> list[float]:
    out = []
    for v in values:
        n = None if isinstance(v, bool | str) else number(v)
        if n is not None and not math.isnan(n):
            out.append(n)
    return out


def column_stats(values: list[Any]) -> dict[str, Any]:
    """{mean, std, min, max, n} of a numeric column's values (std None under two); a text column:
    {value} when its members agree, else {values} (distinct, in order)."""
    present = [v for v in values if v is not None]
    numbers = _numbers(present)
    if present and len(numbers) == len(present):
        return {"mean": statistics.fmean(numbers), "std": statistics.stdev(numbers) if len(numbers) > 1 else None,
                "min": min(numbers), "max": max(numbers), "n": len(numbers)}
    distinct = list(dict.fromkeys(str(v) for v in present))
    return {"value": distinct[0]} if len(distinct) == 1 else {"values": distinct}


def varying_keys(members: list[ResultRow], group_by: list[str]) -> list[str]:
    """Config keys besides the seed and the group keys whose values differ among the members;
    ["config"] where their stored config hashes differ and no recorded key says how."""
    params = [row_params(m) for m in members]
    keys = sorted({k for p in params for k in p} - set(group_by) - {"seed"})
    differ = [k for k in keys if len({repr(p.get(k)) for p in params}) > 1]
    if differ or all(params):
        return differ
    hashes = {m.summary.get("config_hash") for m in members}
    return ["config"] if len(hashes) > 1 or None in hashes and len(members) > 1 else []


def degenerate_mark(summaries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """None, or {baseline, metric, kind, runs} for the runs (summaries) whose main score is at or below
    their majority-class baseline (the highest such baseline where they differ)."""
    marked = []
    for summary in summaries:
        baseline = row_baseline(summary)
        if is_degenerate(summary.get("main_score"), baseline):
            marked.append(baseline)
    if not marked:
        return None
    top = max(marked, key=lambda b: b["value"])
    return {"baseline": top["value"], "metric": top["metric"], "kind": top["kind"], "runs": len(marked)}


def grouped(rows: list[tuple[ResultRow, dict[str, Any]]], group_by: list[str], columns: list[str],
            names: dict[int, str | None], sort: str, order: str) -> list[dict[str, Any]]:
    from ptmlab.views.runs import run_label

    groups: dict[tuple, list[tuple[ResultRow, dict[str, Any]]]] = {}
    for row, values in rows:
        groups.setdefault(tuple(repr(values.get(k)) for k in group_by), []).append((row, values))
    out = []
    for members in groups.values():
        first = members[0][1]
        varying = varying_keys([r for r, _ in members], group_by)
        out.append({
            "key": {k: first.get(k) for k in group_by}, "n": len(members),
            "job_ids": [r.job_id for r, _ in members],
            "labels": [run_label(r.id, r.job_id, names.get(r.job_id)) for r, _ in members],
            "seeds": [r.summary.get("seed") for r, _ in members],
            "varying": varying, "spread": "runs" if varying else "seeds",
            "degenerate": degenerate_mark([r.summary for r, _ in members]),
            "values": {c: column_stats([v.get(c) for _, v in members]) for c in columns},
        })
    column = sort if sort != "id" else None

    def sort_key(group: dict[str, Any]) -> tuple:
        stat = group["values"].get(column) if column else None
        if stat is None and column:
            stat = column_stats([group["key"].get(column)]) if column in group["key"] else None
        mean = stat.get("mean") if stat else None
        if mean is None:
            return (1, 0.0, tuple(str(v) for v in group["key"].values()))
        return (0, -mean if order == "desc" else mean, ())

    out.sort(key=sort_key)
    return out

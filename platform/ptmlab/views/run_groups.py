"""The runs table grouped by any of its keys (`group_by=stage.lr`): per group the members (jobs and
their seeds), each numeric column's mean ± sample std, min, max and n over them, a text column's
value (or its distinct values), and whether the spread is over seeds or over runs — a group whose
members differ in config keys besides the seed and the group keys names those keys (`varying`).
Members at or below their task's majority-class baseline are counted (`degenerate`), with the
baseline they sit at (`baseline`).

A grouping is kept with the runs table's fold (ptmlab.views.runs `RunsFold`) and takes each new
matching row into its group in constant time (running mean and variance: Welford's method), so a
grouping of 100,000 runs answers a request after a job finishes without reading them again."""

from __future__ import annotations

import math
from typing import Any

from ptmlab.results import ResultRow, is_degenerate, number, row_baseline, row_params

MISSING = "—"
MAX_DISTINCT = 100  # a text column's distinct values kept per group (a name per run says nothing more)
# Members listed per group (job ids, labels, seeds; the oldest first): `n` counts them all, and a
# group of 20,000 runs is opened by its key (a filter), not read from a list in every response.
MAX_MEMBERS = 500


class _Column:
    """One column's values over a group's members: running mean/variance of the numbers, and the
    distinct values as text (what shows when any present value is not a number)."""

    __slots__ = ("present", "n", "mean", "m2", "low", "high", "all_numbers", "distinct")

    def __init__(self) -> None:
        self.present = self.n = 0
        self.mean = self.m2 = 0.0
        self.low = self.high = None
        self.all_numbers = True
        self.distinct: dict[str, None] = {}

    def add(self, value: Any) -> None:
        if value is None:
            return
        self.present += 1
        n = None if isinstance(value, bool | str) else number(value)
        if n is None:
            self.all_numbers = False
        else:
            self.n += 1
            delta = n - self.mean
            self.mean += delta / self.n
            self.m2 += delta * (n - self.mean)
            self.low = n if self.low is None else min(self.low, n)
            self.high = n if self.high is None else max(self.high, n)
        if len(self.distinct) < MAX_DISTINCT:
            self.distinct.setdefault(str(value))

    def stats(self) -> dict[str, Any]:
        """{mean, std, min, max, n} (std None under two); a text column: {value} when its members
        agree, else {values} (distinct, in order)."""
        if self.present and self.all_numbers:
            return {
                "mean": self.mean,
                "std": math.sqrt(max(0.0, self.m2) / (self.n - 1)) if self.n > 1 else None,
                "min": self.low,
                "max": self.high,
                "n": self.n,
            }
        distinct = list(self.distinct)
        return {"value": distinct[0]} if len(distinct) == 1 else {"values": distinct}


class _Group:
    __slots__ = ("key", "members", "columns", "first_params", "varying", "all_params", "hashes", "degenerate")

    def __init__(self, key: dict[str, Any], columns: list[str]) -> None:
        self.key = key
        self.members: list[ResultRow] = []
        self.columns = {c: _Column() for c in columns}
        self.first_params: dict[str, str] | None = None  # the first member's config keys (repr of each value)
        self.varying: set[str] = set()
        self.all_params = True
        self.hashes: set[Any] = set()
        self.degenerate: list[dict[str, Any]] = []  # the baselines of the members at or below theirs

    def add(self, row: ResultRow, values: dict[str, Any], group_by: set[str]) -> None:
        params = row_params(row)
        self.all_params = self.all_params and bool(params)
        self.hashes.add(row.summary.get("config_hash"))
        shown = {k: repr(v) for k, v in params.items() if k not in group_by and k != "seed"}
        if self.first_params is None:
            self.first_params = shown
        else:
            # a key differs where its value (None when absent) is not the first member's
            for k in (shown.keys() | self.first_params.keys()) - self.varying:
                if shown.get(k, "None") != self.first_params.get(k, "None"):
                    self.varying.add(k)
        for column, stat in self.columns.items():
            stat.add(values.get(column))
        baseline = row_baseline(row.summary)
        if is_degenerate(row.summary.get("main_score"), baseline):
            self.degenerate.append(baseline)
        self.members.append(row)

    def varying_keys(self) -> list[str]:
        """Config keys besides the seed and the group keys whose values differ among the members;
        ["config"] where their stored config hashes differ and no recorded key says how."""
        if self.varying or self.all_params:
            return sorted(self.varying)
        return ["config"] if len(self.hashes) > 1 or None in self.hashes and len(self.members) > 1 else []

    def sort_key(self, column: str | None, order: str) -> tuple:
        mean = None
        if column in self.columns:
            stat = self.columns[column]
            mean = stat.mean if stat.present and stat.all_numbers else None
        elif column in self.key:
            value = self.key[column]
            mean = None if isinstance(value, bool | str) else number(value)
        if mean is None:
            return (1, 0.0, tuple(str(v) for v in self.key.values()))
        return (0, -mean if order == "desc" else mean, ())

    def as_dict(self, names: dict[int, str | None]) -> dict[str, Any]:
        varying = self.varying_keys()
        top = max(self.degenerate, key=lambda b: b["value"]) if self.degenerate else None
        listed = self.members[:MAX_MEMBERS]
        return {
            "key": self.key,
            "n": len(self.members),
            "job_ids": [r.job_id for r in listed],
            "labels": [run_label(r.id, r.job_id, names.get(r.job_id)) for r in listed],
            "seeds": [r.summary.get("seed") for r in listed],
            "members_listed": len(listed),
            "varying": varying,
            "spread": "runs" if varying else "seeds",
            # how many members sit at or below their majority-class baseline, and that baseline
            "degenerate": len(self.degenerate),
            "baseline": None if top is None else top["value"],
            "baseline_metric": None if top is None else top["metric"],
            "values": {c: stat.stats() for c, stat in self.columns.items()},
        }


class Grouping:
    """The groups of one query (search, filters, group keys, columns), kept up to date row by row."""

    def __init__(self, group_by: list[str], columns: list[str]) -> None:
        self.group_by, self.columns = group_by, columns
        self.read = 0  # rows of the runs table looked at
        self.groups: dict[tuple, _Group] = {}

    def add(self, row: ResultRow, values: dict[str, Any]) -> None:
        key = tuple(repr(values.get(k)) for k in self.group_by)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group({k: values.get(k) for k in self.group_by}, self.columns)
        group.add(row, values, set(self.group_by))

    def page(self, names: dict[int, str | None], sort: str, order: str, start: int, stop: int) -> list[dict[str, Any]]:
        """The groups sorted by the sort column's mean (`order`; those without one last), a page of them."""
        column = sort if sort != "id" else None
        ranked = sorted(self.groups.values(), key=lambda g: g.sort_key(column, order))
        return [g.as_dict(names) for g in ranked[start:stop]]


def run_label(result_id: int, job_id: int | None, job_name: str | None) -> str:
    """How a run is named wherever a person reads it: its job (`#14`, `name (#14)`); a result
    recorded by hand, without a job, as `result <id>`."""
    if job_id is None:
        return f"result {result_id}"
    return f"{job_name} (#{job_id})" if job_name else f"#{job_id}"

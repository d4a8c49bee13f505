"""The probing view: per-layer curves per model × probe task (mean over its runs), control-task
selectivity, structural-probe UUAS/Spearman, representation geometry, attention-head heatmaps
(layer × head).

A probe summary holds a suite: every task of `tasks` becomes a curve, and its random-init baseline
a curve of its own (model "<model> (random init)"), so a score is drawn beside what it beats. A
summary without `tasks` (one task: `probe_task`, `layers`) is read as that one task."""

from __future__ import annotations

import statistics
from typing import Any

from sqlalchemy.orm import Session

from ptmlab.contracts.summaries import PROBE_LAYER_METRICS, AttentionStatistic, ProbeLayer, ProbeSummary
from ptmlab.results import ResultRow, cached_view, filter_options, folded, number

KIND = "probe"
LAYER_METRICS = PROBE_LAYER_METRICS
RANDOM_INIT_SUFFIX = " (random init)"


def _layers(layers: list[ProbeLayer]) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for i, entry in enumerate(layers):
        layer = i if entry.layer is None else entry.layer  # a row from before `layer` was required
        values = {m: number(getattr(entry, m)) for m in LAYER_METRICS}
        if values["selectivity"] is None and values["accuracy"] is not None and values["control_accuracy"] is not None:
            values["selectivity"] = values["accuracy"] - values["control_accuracy"]
        out[layer] = {m: v for m, v in values.items() if v is not None}
    return out


def _heatmaps(heads: AttentionStatistic | list[AttentionStatistic] | None) -> list[dict]:
    items = heads if isinstance(heads, list) else [] if heads is None else [heads]
    return [
        {"statistic": item.statistic or "value", "values": [[number(v) for v in layer] for layer in item.values]}
        for item in items
        if item.values
    ]


def _task_entries(summary: ProbeSummary) -> list[tuple[str, str, dict, list[dict]]]:
    """(model label, task, {layer: values}, heatmaps) for every curve a summary holds."""
    model = summary.model or "-"
    if not summary.tasks:
        return [(model, summary.probe_task or "-", _layers(summary.layers), _heatmaps(summary.attention_heads))]
    out = []
    for task in summary.tasks:
        name = task.probe_task or "-"
        out.append((model, name, _layers(task.layers), _heatmaps(task.heatmaps)))
        if task.random_init is not None and task.random_init.layers:
            out.append((model + RANDOM_INIT_SUFFIX, name, _layers(task.random_init.layers), []))
    return out


def _cloze_rows(result_id: int, summary: ProbeSummary) -> list[dict]:
    return [
        {
            "model": summary.model or "-",
            "result_id": result_id,
            "relation": rel.relation or "-",
            **{k: number(getattr(rel, k)) for k in ("p_at_1", "p_at_10", "mrr", "facts", "oov", "scored")},
        }
        for task in summary.tasks
        if task.family == "cloze"
        for rel in task.relations or []
    ]


def probe_summary(row: ResultRow) -> ProbeSummary | None:
    """A probe row as the page reads it (`ResultRow.model`); None for a row of another kind."""
    summary = row.model
    return summary if isinstance(summary, ProbeSummary) else None


def probing_view(
    session: Session, *, sweep_id: str | None = None, tags: dict[str, str] | None = None
) -> dict[str, Any]:
    key = ("probing", sweep_id, tuple(sorted((tags or {}).items())))
    return cached_view(session, KIND, key, lambda: _probing(session, sweep_id, tags))


class ProbingFold:
    """The view's aggregates kept up to date as probe results arrive (ptmlab.results `folded`):
    a new run re-averages the curves it adds to, not every curve."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], dict[str, Any]] = {}
        self.heatmaps: dict[tuple[str, str, str], dict] = {}  # the latest run's map per model × task × statistic
        self.cloze: list[dict] = []  # LAMA: one row per result × relation
        self.result_count = 0
        self.curves: dict[tuple[str, str], dict[str, Any]] = {}  # curves no new run changed

    def add(self, rows: list[ResultRow]) -> None:
        for row in rows:
            self.result_count += 1
            summary = probe_summary(row)
            if summary is None:
                continue
            self.cloze += _cloze_rows(row.id, summary)
            for model, task, layers, maps in _task_entries(summary):
                if not layers and not maps:
                    continue
                for h in maps:
                    self.heatmaps[(model, task, h["statistic"])] = {
                        "model": model,
                        "probe_task": task,
                        "result_id": row.id,
                        **h,
                    }
                if not layers:
                    continue
                group = self.groups.setdefault((model, task), {"result_ids": [], "layers": {}})
                self.curves.pop((model, task), None)
                group["result_ids"].append(row.id)
                for layer, values in layers.items():
                    per_layer = group["layers"].setdefault(layer, {})
                    for metric, value in values.items():
                        per_layer.setdefault(metric, []).append(value)

    def curve(self, model: str, task: str) -> dict[str, Any]:
        if (model, task) not in self.curves:
            group = self.groups[(model, task)]
            layers = sorted(group["layers"])
            curve: dict[str, Any] = {
                "model": model,
                "probe_task": task,
                "result_ids": list(group["result_ids"]),
                "runs": len(group["result_ids"]),
                "layers": layers,
            }
            for metric in LAYER_METRICS:
                series = [group["layers"][layer].get(metric) for layer in layers]
                if not any(series):
                    continue
                curve[metric] = [statistics.fmean(v) if v else None for v in series]
                curve[f"{metric}_std"] = [statistics.stdev(v) if v and len(v) > 1 else None for v in series]
            self.curves[(model, task)] = curve
        return self.curves[(model, task)]


def _probing(session: Session, sweep_id: str | None, tags: dict[str, str] | None) -> dict[str, Any]:
    fold, lock = folded(session, KIND, ("probing",), ProbingFold, ProbingFold.add, sweep_id=sweep_id, tags=tags)
    with lock:
        groups, heatmaps, cloze = fold.groups, fold.heatmaps, fold.cloze
        return {
            # a suite's attention analysis has heat maps and no per-layer curve: its task is listed too
            "models": sorted({m for m, _ in groups} | {m for m, _, _ in heatmaps} | {r["model"] for r in cloze}),
            "probe_tasks": sorted({t for _, t in groups} | {t for _, t, _ in heatmaps}),
            "curves": [fold.curve(model, task) for model, task in sorted(groups)],
            "heatmaps": [heatmaps[k] for k in sorted(heatmaps)],
            "statistics": sorted({stat for _, _, stat in heatmaps}),
            "cloze": list(cloze),
            "result_count": fold.result_count,
            "options": filter_options(session, KIND),
            "filters": {"sweep_id": sweep_id, "tags": dict(tags or {})},
        }

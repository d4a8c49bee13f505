"""Which metrics a trial's stage reports at each validation (the names the worker finds in its
progress.json history), so a study whose objective no stage reports, or whose pruner has no
intermediate values to judge, is refused before anything is queued.

A multi-objective study reads its objectives from the trial job's stored summary instead (the
`results` row, ptmlab.contracts.summaries): compression has no validation curve, and its cost
(size, latency) is known only at the end. Its objectives are the summary model's number fields
(`score`, `latency_ms`, `size_bytes`, ... of CompressSummary's `compressed` measurement) and `metrics.<name>` for a metric
the stage records in `metrics`."""

from __future__ import annotations

from typing import Any

from ptmlab.errors import ConfigError

NUMBER_TYPES = (int, float)


def validation_metrics(cfg: Any) -> set[str]:
    """The metric names `cfg`'s stage writes at each validation (empty: it validates never)."""
    stage = str(cfg.stage.name)
    if stage == "finetune":
        # runtime/progress.py records Lightning's `val/*` callback metrics: val/<task>/<metric>.
        return {f"val/{cfg.task.name}/{m}" for m in cfg.task.metrics} | {f"val/{cfg.task.name}/loss"}
    if stage == "sleep" and int(cfg.stage.get("validations") or 0) > 0:
        return {"val/score"}
    return set()


def check_objective(cfg: Any, objective: str, pruner: str) -> None:
    reported = validation_metrics(cfg)
    stage = str(cfg.stage.name)
    if pruner != "none" and not reported:
        raise ConfigError(
            f"pruner={pruner}: stage={stage} reports no intermediate values (it never validates "
            f"during training); use pruner=none"
        )
    if objective not in reported:
        known = ", ".join(sorted(reported)) or "none"
        raise ConfigError(f"objective {objective!r}: stage={stage} does not report it (it reports: {known})")


def objective_points(progress: dict[str, Any] | None, objective: str) -> list[tuple[int | None, float]]:
    """(training step, the objective's value) at each validation, in order, from a job's progress."""
    history = (progress or {}).get("history") or []
    return [
        (p.get("step"), float(p[objective]))
        for p in history
        if isinstance(p, dict) and isinstance(p.get(objective), int | float)
    ]


def is_last_step(progress: dict[str, Any] | None, step: int | None) -> bool:
    """A validation at the end of training: nothing is left to save by pruning there."""
    total = (progress or {}).get("total_steps")
    return isinstance(step, int | float) and isinstance(total, int | float) and step >= total


def final_value(progress: dict[str, Any] | None, objective: str) -> float | None:
    """The objective when the trial ended: its latest value (the last validation's)."""
    latest = ((progress or {}).get("metrics") or {}).get(objective)
    if isinstance(latest, int | float):
        return float(latest)
    points = objective_points(progress, objective)
    return points[-1][1] if points else None


def steps_trained(progress: dict[str, Any] | None) -> int:
    step = (progress or {}).get("step")
    return int(step) if isinstance(step, int | float) else 0


# -- objectives read from the summary (multi-objective studies) ---------------------------------
def summary_objectives(cfg: Any) -> set[str]:
    """The names a multi-objective study of `cfg`'s stage may optimise: the number fields of the
    stage's summary model, and `metrics.<name>` for the metrics a fine-tune records."""
    import types
    import typing

    from ptmlab.contracts.summaries import SUMMARY_BY_KIND, Measurement

    stage = str(cfg.stage.name)
    model = SUMMARY_BY_KIND.get(stage)
    if model is None:
        return set()
    fields = dict(model.model_fields)
    if "compressed" in fields:  # a compress summary: the compressed model's numbers by their own names
        fields = {**Measurement.model_fields, **fields}
    names = set()
    for name, field in fields.items():
        annotation = field.annotation
        members = (
            typing.get_args(annotation)
            if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
            else (annotation,)
        )
        if name not in ("seed",) and any(m in NUMBER_TYPES for m in members) and bool not in members:
            names.add(name)
    if stage in ("finetune", "multitask") and cfg.get("task") is not None:
        names |= {f"metrics.{m}" for m in validation_metrics(cfg)}
    return names


def check_summary_objectives(cfg: Any, objectives: list[str], pruner: str) -> None:
    stage = str(cfg.stage.name)
    if pruner != "none":
        raise ConfigError(
            f"pruner={pruner}: a multi-objective study cannot prune (Optuna's pruners judge one "
            f"objective); use pruner=none"
        )
    known = summary_objectives(cfg)
    for name in objectives:
        if name not in known:
            raise ConfigError(
                f"objective {name!r}: the stage={stage} summary has no such number "
                f"(it has: {', '.join(sorted(known)) or 'none'})"
            )


def summary_value(summary: dict[str, Any] | None, name: str) -> float | None:
    """`name` (a field, or `metrics.<metric>`) in a stored summary; None when missing or not a
    finite number."""
    node: Any = summary or {}
    head, _, rest = name.partition(".")
    if head not in node and isinstance(node.get("compressed"), dict):
        node = node["compressed"]  # `score`, `size_bytes`, ... of a compress summary: its compressed model's
    node = node.get(head) if isinstance(node, dict) else None
    if rest:
        node = node.get(rest) if isinstance(node, dict) else None
    if (
        isinstance(node, bool)
        or not isinstance(node, int | float)
        or node != node
        or node in (float("inf"), float("-inf"))
    ):
        return None
    return float(node)

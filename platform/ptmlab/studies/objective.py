"""Which metrics a trial's stage reports at each validation (the names the worker finds in its
progress.json history), so a study whose objective no stage reports, or whose pruner has no
intermediate values to judge, is refused before anything is queued."""

from __future__ import annotations

from typing import Any

from ptmlab.errors import ConfigError


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
        raise ConfigError(f"pruner={pruner}: stage={stage} reports no intermediate values (it never validates "
                          f"during training); use pruner=none")
    if objective not in reported:
        known = ", ".join(sorted(reported)) or "none"
        raise ConfigError(f"objective {objective!r}: stage={stage} does not report it (it reports: {known})")


def objective_points(progress: dict[str, Any] | None, objective: str) -> list[tuple[int | None, float]]:
    """(training step, the objective's value) at each validation, in order, from a job's progress."""
    history = (progress or {}).get("history") or []
    return [(p.get("step"), float(p[objective])) for p in history
            if isinstance(p, dict) and isinstance(p.get(objective), int | float)]


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

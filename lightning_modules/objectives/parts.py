"""The weighted parts of an `objective` config node: one objective, or several combined."""

from __future__ import annotations

from omegaconf import DictConfig

from ptmlab.contracts import ConfigError


def objective_parts(objective_cfg: DictConfig) -> dict[str, tuple[float, DictConfig]]:
    """{part name: (loss weight, module config)} for a single or a combined objective."""
    if "objectives" in objective_cfg and objective_cfg.objectives:
        return {
            str(name): (float(part.get("weight", 1.0)), part.module) for name, part in objective_cfg.objectives.items()
        }
    if "module" not in objective_cfg:
        raise ConfigError(f"objective={objective_cfg.get('name')} has neither `module` nor `objectives`")
    return {str(objective_cfg.name): (1.0, objective_cfg.module)}

"""The weighted parts of an `objective` config node (one objective, or several combined), each
built from its declaration."""

from __future__ import annotations

from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from ptmlab.contracts import ConfigError
from ptmlab.methods.validation import declared


def objective_parts(objective_cfg: DictConfig) -> dict[str, tuple[float, DictConfig]]:
    """{part name: (loss weight, module config)} for a single or a combined objective."""
    if "objectives" in objective_cfg and objective_cfg.objectives:
        return {
            str(name): (float(part.get("weight", 1.0)), part.module) for name, part in objective_cfg.objectives.items()
        }
    if "module" not in objective_cfg:
        raise ConfigError(f"objective={objective_cfg.get('name')} has neither `module` nor `objectives`")
    return {str(objective_cfg.name): (1.0, objective_cfg.module)}


def module_path(objective_cfg: DictConfig, part: str) -> str:
    """Where a part's module node sits in the config, as an error names it."""
    combined = "objectives" in objective_cfg and objective_cfg.objectives
    return f"objective.objectives.{part}.module" if combined else "objective.module"


def build_objective(module_cfg: DictConfig, backbone: Any, tokenizer: Any, path: str = "objective.module") -> Any:
    """The objective a module node names, given its declaration validated from the node (an
    objective whose declaration declares no parameter takes none)."""
    node = OmegaConf.to_container(module_cfg, resolve=True)
    objective = get_class(str(node["_target_"]))
    params = declared(objective.declaration, node, path)
    if set(objective.declaration.model_fields) == {"target"}:
        return objective(backbone, tokenizer)
    return objective(backbone, tokenizer, params)


def build_objectives(objective_cfg: DictConfig, backbone: Any, tokenizer: Any) -> tuple[dict, dict[str, float]]:
    """({part: objective}, {part: loss weight}) of an `objective` node."""
    objectives, weights = {}, {}
    for name, (weight, module_cfg) in objective_parts(objective_cfg).items():
        objectives[name] = build_objective(module_cfg, backbone, tokenizer, module_path(objective_cfg, name))
        weights[name] = weight
    return objectives, weights

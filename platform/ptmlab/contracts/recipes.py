"""What a run records of its recipe (platform/ptmlab/recipes.py applies it at compose time) and the
warnings on unusual hyper-parameters: read by the stages, torch-free.

`recipe_warnings` names what is unusual in the values a run trains with (too few optimizer steps,
a fine-tuning learning rate for a model trained from scratch, a batch as large as the data): one
line each, logged and shown on the job page, never an error.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

MIN_STEPS = 100
MIN_SCRATCH_LR = 1e-4
MAX_BATCH_SHARE = 0.1


def starts_from_random_weights(cfg: DictConfig) -> bool:
    """`backbone=random`, or no backbone reference with an architecture ptmlab builds itself (only
    `model=hf` loads pre-trained weights: conf/model/hf.yaml)."""
    backbone = cfg.get("backbone")
    if backbone == "random":
        return True
    if backbone is not None:
        return False
    model = cfg.get("model")
    if model is None:
        return False
    if str(model.get("family")) == "hf":
        return not bool(OmegaConf.select(model, "backbone.pretrained", default=True))
    return True


def effective_recipe(cfg: DictConfig) -> dict[str, Any] | None:
    """What the summary and the job page show: the recipe's name and each of its keys' value and
    origin (`{"stage.lr": {"value": 5e-5, "origin": "recipe:token_classification"}}`)."""
    node = cfg.get("recipe")
    if not isinstance(node, DictConfig) or node.get("origin") is None:
        return None
    values = {
        key: {"value": _plain(OmegaConf.select(cfg, key, default=None)), "origin": str(origin)}
        for key, origin in node.origin.items()
    }
    return {"name": str(node.name), "requested": str(node.requested), "values": values}


def recipe_warnings(cfg: DictConfig, *, train_rows: int, optimizer_steps: int, effective_batch: int) -> list[str]:
    """One line per unusual value the run trains with (the job's log and page show them)."""
    warnings = []
    if optimizer_steps < MIN_STEPS:
        warnings.append(
            f"{optimizer_steps} optimizer steps: fine-tuning usually takes at least {MIN_STEPS} "
            f"(stage.epochs={cfg.stage.epochs}, stage.batch_size={cfg.stage.batch_size}, {train_rows} training rows)"
        )
    lr = float(cfg.stage.lr)
    if starts_from_random_weights(cfg) and lr < MIN_SCRATCH_LR:
        warnings.append(
            f"stage.lr={lr:g} for a model trained from random weights: a fine-tuning rate barely moves it "
            f"(recipes from scratch use 1e-3; at least {MIN_SCRATCH_LR:g})"
        )
    if train_rows and effective_batch > MAX_BATCH_SHARE * train_rows:
        warnings.append(
            f"an effective batch of {effective_batch} is more than a tenth of the {train_rows} training rows: "
            "few updates per epoch"
        )
    return warnings


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value

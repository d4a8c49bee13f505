"""Recipes: the standard hyper-parameters of each task family and training regime (conf/recipe/),
applied to a fine-tune at compose time unless the user set the key, and recorded with each value's
origin.

    recipe=auto (default)   chosen from the task's kind, the model's family and whether the
                            backbone starts from random weights (`recipe_for`)
    recipe=<name>           that recipe, whatever the task
    recipe=none             the stage's own defaults (conf/stage/finetune.yaml), as they are

A recipe file holds `set:` (the keys it sets, nested like the config) and optionally `base:` (a
recipe it extends) and `then:` (a regime applied on top, such as `from_scratch`). A key named in an
override (`stage.lr=1e-4`) keeps the user's value; a key a sweep or a study varies is named as such.
`apply_recipe` writes `recipe.origin` (each key any recipe sets: `recipe:<name>`, `override`, `sweep`,
or `default`: the stage's own value)
beside the values themselves, so config.yaml, the MLflow params, the summary and the job page say
which recipe ran and where each value came from. Runs with the same `recipe.name` and no override
of its keys used the same recipe.

What the science half reads back (the summary's `recipe`, the warnings) is in
ptmlab.contracts.recipes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from ptmlab.contracts.recipes import starts_from_random_weights
from ptmlab.errors import ConfigError

RECIPE_STAGES = ("finetune",)  # the stages whose training a recipe sets
AUTO, NONE = "auto", "none"
PROMPT_BASED = ("prompt_finetune", "prompt_zero_shot")  # PET / LM-BFF; prompt_tuning is a delta method
SWEPT_KEYS_ENV = "PTMLAB_SWEPT_KEYS"  # set by the worker for a sweep's or a study's job: the keys they vary


def recipe_for(cfg: DictConfig) -> str:
    """The recipe `recipe=auto` picks from the task's kind, the adaptation (prompt-based fine-tuning
    has its own) and the model's family (a decoder generates from a prompt); `recipe_values` adds
    the recipe's from-scratch regime (`then:`) when the backbone starts from random weights. A
    Hugging Face checkpoint (`model=hf`) generating takes the encoder-decoder recipe."""
    task = cfg.get("task")
    if task is None:
        return NONE
    kind = str(task.get("kind"))
    adaptation = cfg.get("adaptation")
    adaptation_name = str(adaptation.get("name")) if adaptation is not None else "full"
    family = str(OmegaConf.select(cfg, "model.family", default=""))
    if adaptation_name in PROMPT_BASED and kind == "classification":
        return "prompt_few_shot"
    if kind == "generation":
        return "generation_decoder" if family == "decoder" else "generation_encoder_decoder"
    return {
        "classification": "sequence_classification",
        "regression": "regression",
        "token_classification": "token_classification",
        "span_extraction": "span_extraction",
        "multiple_choice": "multiple_choice",
    }.get(kind, NONE)


def load_recipe(conf_dir: Path, name: str) -> dict[str, Any]:
    """conf/recipe/<name>.yaml with its `base:` chain merged under it (the file's own keys win)."""
    path = conf_dir / "recipe" / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (conf_dir / "recipe").glob("*.yaml"))
        raise ConfigError(f"recipe={name}: no conf/recipe/{name}.yaml (available: {', '.join(known)})")
    loaded = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(loaded, dict):
        raise ConfigError(f"conf/recipe/{name}.yaml: expected a mapping")
    node = {str(k): v for k, v in loaded.items()}
    base = node.get("base")
    if base:
        merged = load_recipe(conf_dir, str(base))
        node = {**node, "set": _deep_merge(merged.get("set") or {}, node.get("set") or {})}
        node.setdefault("then", merged.get("then"))
    return node


def recipe_values(conf_dir: Path, name: str, *, from_scratch: bool) -> tuple[str, dict[str, Any]]:
    """The recipe's name as recorded and its values as dotted keys, the from-scratch regime
    (`then:`) merged in when the backbone starts from random weights."""
    node = load_recipe(conf_dir, name)
    values = dict(flatten(node.get("set") or {}))
    then = node.get("then")
    if from_scratch and then:
        values.update(flatten(load_recipe(conf_dir, str(then)).get("set") or {}))
        name = f"{name}+{then}"
    return name, values


@lru_cache(maxsize=4)
def all_recipe_keys(conf_dir: Path) -> frozenset[str]:
    """The keys any recipe of conf/recipe/ sets."""
    return frozenset(
        key
        for path in (conf_dir / "recipe").glob("*.yaml")
        for key, _ in flatten(load_recipe(conf_dir, path.stem).get("set") or {})
    )


def flatten(node: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from flatten(value, f"{dotted}.")
        else:
            yield dotted, value


def override_keys(overrides: Sequence[str]) -> set[str]:
    """The dotted keys the overrides set (`stage.lr=1e-4`, `++stage.lr=...`); groups (`task=x`) too."""
    keys = set()
    for override in overrides:
        key = str(override).split("=", 1)[0].lstrip("+~").split("@", 1)[0].strip()
        if key:
            keys.add(key)
    return keys


def swept_keys() -> set[str]:
    return {k.strip() for k in os.environ.get(SWEPT_KEYS_ENV, "").split(",") if k.strip()}


def apply_recipe(cfg: DictConfig, overrides: Sequence[str]) -> DictConfig:
    """Set the chosen recipe's values the user did not set, and record `recipe.name`,
    `recipe.requested` and `recipe.origin` (written here only: an override of them is refused)."""
    node = cfg.get("recipe")
    if not isinstance(node, DictConfig):
        return cfg
    for written in ("origin", "requested"):
        if node.get(written) is not None:
            raise ConfigError(f"recipe.{written} is what ptmlab records of the recipe: choose one with recipe=<name>")
    requested = str(node.get("name") or AUTO)
    stage_name = str(OmegaConf.select(cfg, "stage.name", default=""))
    name = requested
    if requested == AUTO:
        name = recipe_for(cfg) if stage_name in RECIPE_STAGES else NONE
    elif requested != NONE and stage_name not in RECIPE_STAGES:
        raise ConfigError(
            f"recipe={requested}: a recipe sets a fine-tune's training (stage={', '.join(RECIPE_STAGES)}), "
            f"not stage={stage_name}"
        )
    with open_dict(cfg):
        cfg.recipe = {"name": name, "requested": requested, "origin": {}}
    if name == NONE:
        return cfg
    conf_dir = Path(str(OmegaConf.select(cfg, "paths.conf_dir", default="") or _conf_dir()))
    name, values = recipe_values(conf_dir, name, from_scratch=starts_from_random_weights(cfg))
    user, swept = override_keys(overrides), swept_keys()
    origin: dict[str, str] = {}
    # every key some recipe sets is recorded, so that runs of different task families compare key
    # by key: this recipe's, the user's, or the stage's default (`default`)
    for key in sorted(set(values) | all_recipe_keys(conf_dir)):
        if OmegaConf.select(cfg, key, default=_ABSENT) is _ABSENT:
            if key not in values or _group_of(key) in user:
                continue  # the user chose an option without the key (scheduler=constant has no warm-up)
            raise ConfigError(f"recipe={name} sets {key}, which this config does not have (conf/recipe/)")
        if key in swept:
            origin[key] = "sweep"
        elif key in user:
            origin[key] = "override"
        elif key in values:
            OmegaConf.update(cfg, key, values[key], merge=False)
            origin[key] = f"recipe:{name}"
        else:
            origin[key] = "default"
    with open_dict(cfg):
        cfg.recipe = {"name": name, "requested": requested, "origin": origin}
    return cfg


_ABSENT = object()


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _group_of(key: str) -> str:
    return key.split(".", 1)[0]


def _conf_dir() -> Path:
    from ptmlab.config_groups import CONF_DIR

    return CONF_DIR

"""Types of every config group, checked at compose time (torch-free: the API checks submissions
with it, local runs and sweeps before a job is queued).

`check_config_types(cfg)` is a `ptmlab.config.CHECKS` entry. It resolves the composed
config (`hydra` aside) and validates each group node with a pydantic model: strict types, no
unknown key, ranges (sizes > 0, dropouts in [0, 1), heads dividing the hidden size, lr > 0 ...).
Groups whose options build different classes are keyed by `_target_` (`model.backbone`,
`objective.module`, `data.corpus`, `task.data`, `adaptation`, `trainer`, `optimizer`,
`scheduler`, `attack`, `defence`: each target's declaration in ptmlab.methods) or, for `stage`, by
`stage.entry`. This package holds the rest: the root, the group and stage node shapes and the
checks that span groups. A failure is one ConfigError naming the dotted
key, the value and what is expected:

    model.backbone.hidden_size='abc': expected an integer
    model.backbone.num_heads=5 does not divide model.backbone.hidden_size=128
    model.backbone.foo: unknown key (known: _target_, activation, ...)

`???` values stay unchecked (Hydra reports them where they are read): `model=hf` composes
without `model.name_or_path`.
"""

from __future__ import annotations

from typing import Annotated, Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError, InterpolationToMissingValueError, MissingMandatoryValue
from pydantic import BaseModel

from ptmlab.config_groups import list_config_groups
from ptmlab.config_schema.data import DataNode, TokenizerNode
from ptmlab.config_schema.defence import check_defence
from ptmlab.config_schema.models import ModelNode
from ptmlab.config_schema.objectives import ObjectiveNode
from ptmlab.config_schema.probing import PROBE_STAGES, ProbeNode
from ptmlab.config_schema.recipe import RecipeNode
from ptmlab.config_schema.stages import STAGES, AnyStage, Multitask
from ptmlab.config_schema.tasks import TaskNode
from ptmlab.errors import ConfigError
from ptmlab.methods.adaptation import ADAPTATIONS
from ptmlab.methods.attacks import ATTACKS
from ptmlab.methods.compression import COMPRESSIONS
from ptmlab.methods.defences import DEFENCES
from ptmlab.methods.fields import AnyTarget, Name, Node, NonNegativeFloat, NonNegativeInt, in_range
from ptmlab.methods.models import BACKBONES
from ptmlab.methods.objectives import OBJECTIVES
from ptmlab.methods.readers import CORPORA, READERS
from ptmlab.methods.training import OPTIMIZERS, SCHEDULERS, TRAINERS
from ptmlab.methods.validation import MAX_ERRORS_SHOWN, _show, _validate

# `_target_` -> its declaration (ptmlab.methods: one module per group), over every group.
TARGETS: dict[str, type[BaseModel]] = {
    **BACKBONES,
    **OBJECTIVES,
    **CORPORA,
    **READERS,
    **ADAPTATIONS,
    **TRAINERS,
    **OPTIMIZERS,
    **SCHEDULERS,
    **COMPRESSIONS,
    **ATTACKS,
    **DEFENCES,
}
# Groups whose node has no `_target_` of its own.
NODE_SCHEMAS: dict[str, type[BaseModel]] = {
    "model": ModelNode,
    "objective": ObjectiveNode,
    "data": DataNode,
    "tokenizer": TokenizerNode,
    "task": TaskNode,
    "probe": ProbeNode,
    "recipe": RecipeNode,
}
TARGET_GROUPS = ("trainer", "optimizer", "scheduler", "adaptation", "compression", "attack", "defence")
# Checked in this order: a value that others interpolate (`${tokenizer.vocab_size}`) is named first.
GROUPS = ("stage", "tokenizer", "data", "model", "objective", "task", "probe", "recipe", *TARGET_GROUPS)
STAGES = {**STAGES, **PROBE_STAGES}
PRETRAIN_ENTRY = "lightning_modules.stages.pretrain.run_pretrain"


class Paths(Node):
    home: Name
    data_dir: Name
    cache_dir: Name
    conf_dir: Name | None = None  # set by ptmlab.config.set_runtime_paths (never by hand)
    artifact_root: Name | None = None  # set by ptmlab.config.set_runtime_paths


class Tracking(Node):
    uri: str | None = None  # null: $MLFLOW_TRACKING_URI, else the embedded store
    experiment: Name
    retry_s: NonNegativeFloat | None = None  # set by ptmlab.config.set_runtime_paths (PTMLAB_TRACKING_RETRY_S)
    job_id: str | None = None  # set by ptmlab.config.set_runtime_paths (PTMLAB_JOB_ID)


class Root(Node):
    """Root keys other than the group nodes."""

    seed: Annotated[int, in_range(0, 2**32 - 1, what="a seed")] = 42  # Lightning's seed range
    backbone: Name | None = None  # null | random | job:<id> | mlflow:<run_id> | <folder> | <HF name>
    source: Name | None = None  # compress: job:<id> | mlflow:<run_id> | <run or export folder>
    resume: bool = False
    run_name: Name = "run"
    checkpoint_every_n_steps: NonNegativeInt = 100  # 0: only last.ckpt at the end
    tags: dict[str, Any] | None = None
    paths: Paths
    tracking: Tracking
    run_dir: Name | None = None  # instead of Hydra's run folder (tests, benchmarks)


def check_config_types(cfg: DictConfig) -> None:
    """ptmlab.config.CHECKS entry: raise one ConfigError naming the first bad keys."""
    missing: set[str] = set()
    errors: list[str] = []
    plain = _resolve(cfg, missing, errors)
    errors += _check_root(plain, missing)
    for group in GROUPS:
        node = plain.get(group)
        if node is None:
            continue  # `task: null`, `adaptation: null`, or a stage that needs no such group
        if not isinstance(node, dict):
            errors.append(f"{group}={_show(node)}: expected a config node (choose an option: {group}=<name>)")
            continue
        errors += _check_node(_schema_of(group, node), node, group, missing)
    if not errors:
        errors += _check_multitask_tasks(cfg, plain)
    if not errors:
        errors += _check_across_groups(plain)
    if errors:
        more = len(errors) - MAX_ERRORS_SHOWN
        raise ConfigError("; ".join(errors[:MAX_ERRORS_SHOWN]) + (f" (and {more} more)" if more > 0 else ""))


def _schema_of(group: str, node: dict) -> type[BaseModel]:
    if group == "stage":
        return STAGES.get(node.get("entry"), AnyStage)
    if group in TARGET_GROUPS:
        return TARGETS.get(node.get("_target_"), AnyTarget)
    return NODE_SCHEMAS[group]


def _check_root(plain: dict, missing: set[str]) -> list[str]:
    known = set(Root.model_fields) | set(GROUPS)
    scalars = {k: v for k, v in plain.items() if k in Root.model_fields}
    errors = _validate(Root, scalars, "", missing)
    unknown = [key for key in plain if key not in known]
    # A group of conf/ without a schema yet is let through (a test lists the groups that need one).
    unknown = [key for key in unknown if key not in list_config_groups()] if unknown else []
    errors += [f"{key}: unknown key (known: {', '.join(sorted(known))})" for key in unknown]
    return errors


def _check_node(schema: type[BaseModel], node: dict, path: str, missing: set[str]) -> list[str]:
    """The node against its schema, then every `_target_` node inside it against its own."""
    errors = _validate(schema, node, path, missing)
    for sub_path, sub in _target_nodes(node, path):
        errors += _validate(TARGETS.get(sub["_target_"], AnyTarget), sub, sub_path, missing)
    return errors


def _target_nodes(value: Any, path: str, top: bool = True):
    if isinstance(value, dict):
        if not top and isinstance(value.get("_target_"), str):
            yield path, value
        for k, v in value.items():
            yield from _target_nodes(v, f"{path}.{k}", top=False)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _target_nodes(v, f"{path}[{i}]", top=False)


def _check_multitask_tasks(cfg: DictConfig, plain: dict) -> list[str]:
    """stage=multitask: each task of `stage.tasks`, with `stage.task_overrides` merged, is typed as
    `task` is (ptmlab.contracts.task_checks resolves the names and checks their semantics)."""
    stage = plain.get("stage")
    if not isinstance(stage, dict) or STAGES.get(stage.get("entry")) is not Multitask:
        return []
    from ptmlab.contracts.task_checks import multitask_task_nodes

    errors: list[str] = []
    for name, node in multitask_task_nodes(cfg).items():
        path, missing = f"stage.tasks[{name}]", set()
        task = _plain_node(node, path, missing, errors)
        errors += _check_node(TaskNode, task, path, missing)
    return errors


def _check_virtual_tokens(plain: dict) -> list[str]:
    """Prompt/prefix tuning: the virtual tokens and the longest input must fit the positions of the
    `model` the run builds (a `backbone=` reference brings its own, checked when it loads)."""
    tokens = (plain.get("adaptation") or {}).get("num_tokens")
    max_len = (plain.get("task") or {}).get("max_length")
    max_pos = ((plain.get("model") or {}).get("backbone") or {}).get("max_position_embeddings")
    if plain.get("backbone") not in (None, "random") or not all(isinstance(v, int) for v in (tokens, max_len, max_pos)):
        return []
    if tokens + max_len > max_pos:
        return [
            f"adaptation.num_tokens={tokens} + task.max_length={max_len} = {tokens + max_len} exceeds "
            f"model.backbone.max_position_embeddings={max_pos}: shorten one of them"
        ]
    return []


def _check_across_groups(plain: dict) -> list[str]:
    """Ranges that involve two groups (only once each group is valid on its own)."""
    if (plain.get("stage") or {}).get("entry") != PRETRAIN_ENTRY:
        return _check_virtual_tokens(plain) + check_defence(plain)
    errors = []
    max_steps = (plain.get("trainer") or {}).get("max_steps")
    if isinstance(max_steps, int) and max_steps <= 0:
        errors.append(
            f"trainer.max_steps={max_steps}: stage=pretrain needs a positive number of steps "
            f"(the learning-rate schedule is sized by it)"
        )
    block = (plain.get("data") or {}).get("block_size")
    max_pos = ((plain.get("model") or {}).get("backbone") or {}).get("max_position_embeddings")
    if isinstance(block, int) and isinstance(max_pos, int) and block > max_pos:
        errors.append(f"data.block_size={block} exceeds model.backbone.max_position_embeddings={max_pos}")
    return errors


# -- resolving ----------------------------------------------------------------------------------

_MISSING = object()


def _resolve(cfg: DictConfig, missing: set[str], errors: list[str]) -> dict:
    """The config without `hydra`, resolved; `???` values left out and their keys put in `missing`."""
    if "hydra" not in cfg:
        try:  # the common case in one pass; a `???` (or a broken interpolation) takes the walk below
            return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
        except (MissingMandatoryValue, InterpolationResolutionError):
            pass
    return {
        str(k): v for k in cfg.keys() if k != "hydra" if (v := _plain(cfg, k, str(k), missing, errors)) is not _MISSING
    }


def _plain(container, key, path: str, missing: set[str], errors: list[str]):
    """container[key] resolved into plain Python; `???` (or an interpolation of one) -> _MISSING."""
    try:
        if OmegaConf.is_missing(container, key):
            missing.add(path)
            return _MISSING
        value = container[key]
    except (MissingMandatoryValue, InterpolationToMissingValueError):
        missing.add(path)
        return _MISSING
    except InterpolationResolutionError as exc:
        raw = container._get_node(key)._value()
        missing.add(path)
        if "${hydra:" not in str(raw):  # resolvable only inside a Hydra run: left to it
            errors.append(f"{path}={raw}: cannot be resolved ({str(exc).splitlines()[0]})")
        return _MISSING
    if isinstance(value, DictConfig | ListConfig):
        return _plain_node(value, path, missing, errors)
    return value


def _plain_node(node: DictConfig | ListConfig, path: str, missing: set[str], errors: list[str]):
    if isinstance(node, ListConfig):
        items = [_plain(node, i, f"{path}[{i}]", missing, errors) for i in range(len(node))]
        return ["???" if v is _MISSING else v for v in items]
    out = {}
    for k in node.keys():
        v = _plain(node, k, f"{path}.{k}" if path else str(k), missing, errors)
        if v is not _MISSING:
            out[k] = v
    return out

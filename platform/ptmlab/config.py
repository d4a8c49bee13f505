"""Composing and checking experiment configs without torch.

Used by `ptmlab.run` before any work starts and by the API to validate a submission, so an
unknown group/option/key or an impossible combination fails with one line naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

from ptmlab.config_groups import CONF_DIR, list_config_groups
from ptmlab.config_schema import check_config_types
from ptmlab.contracts.families import FAMILIES
from ptmlab.contracts.objective_checks import check_objective_data
from ptmlab.contracts.task_checks import check_multitask, check_task
from ptmlab.errors import ConfigError
from ptmlab.recipes import apply_recipe
from ptmlab.settings import get_settings

# Compose-time checks after the family check, in order; each raises one ConfigError naming the
# keys. Types first, so the semantic checks below only ever see well-typed values.
CHECKS = (
    check_config_types,  # types, unknown keys and ranges of every group (ptmlab.config_schema)
    check_task,  # task nodes: kind, labels, metrics, heads
    check_multitask,  # stage.tasks: each named task as `task=` is
    check_objective_data,  # objective ⟂ data (sentence pairs, parallel text)
)


def compose_config(overrides: Sequence[str] = (), *, return_hydra_config: bool = False) -> DictConfig:
    """Compose conf/config.yaml with `overrides`; Hydra's errors become one-line ConfigErrors."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if not CONF_DIR.is_dir():
        raise ConfigError(f"config folder not found: {CONF_DIR}")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="ptmlab"):
            cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=return_hydra_config)
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        raise ConfigError(_one_line(exc)) from None
    except RecursionError:
        raise ConfigError(f"overrides nested too deeply to compose: {' '.join(overrides)[:200]}") from None
    except OSError as exc:  # Hydra looks a key up as a group folder: `File name too long`
        raise ConfigError(f"overrides {' '.join(overrides)[:200]!r}: {exc.strerror or exc}") from None
    except (TypeError, AssertionError, AttributeError, KeyError, IndexError) as exc:
        # Hydra's internals on a value of the wrong shape (`adaptation=[0]`: a group option list of ints).
        raise ConfigError(
            f"overrides {' '.join(overrides)[:200]!r} do not compose: {type(exc).__name__}: {_one_line(exc)}"
        ) from None
    finally:
        GlobalHydra.instance().clear()
    try:
        check_config(apply_recipe(set_runtime_paths(cfg), overrides))
    except OmegaConfBaseException as exc:
        # A deleted or broken node that something else refers to (`~model`: run_name uses ${model.name}).
        raise ConfigError(_one_line(exc)) from None
    return cfg


def set_runtime_paths(cfg: DictConfig) -> DictConfig:
    """Resolve what the platform knows into the config, so the science half reads only `cfg`
    and never imports ptmlab.settings: where the config came from (`paths.conf_dir`: checks and
    stages that read other members of conf/, the git state of a run), the artifact root, the
    tracking URI and its retry budget, and the queue's job id (set by the worker; a job a worker
    runs always tracks to the configured store). Idempotent."""
    settings = get_settings()
    for node in ("paths", "tracking"):
        if not isinstance(cfg.get(node), DictConfig):
            raise ConfigError(f"{node}: the node is missing or not a mapping")
    with open_dict(cfg):
        cfg.paths.conf_dir = str(CONF_DIR)
        cfg.paths.artifact_root = str(settings.artifact_root)
        # A worker's job writes to the worker's configured store, whatever its config says: a job row
        # is data a remote caller chose (the API refuses `tracking.*` too).
        if settings.job_id or not cfg.tracking.get("uri"):
            cfg.tracking.uri = settings.resolved_tracking_uri
        cfg.tracking.retry_s = float(settings.tracking_retry_s)
        cfg.tracking.job_id = settings.job_id
    return cfg


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    head = lines[0]
    # Hydra lists only the top level of a nested group; list every option of the group.
    missing = re.search(r"Could not find '([^']+)/[^']+'", head)
    if missing and "Available options" in str(exc):
        group = missing.group(1).split("/")[0]
        head = f"{head} (available: {', '.join(list_config_groups().get(group, []))})"
    elif len(lines) > 1 and lines[0].startswith("Could not override"):
        # Hydra's second line suggests `+key=...`; the reason ("Key 'x' is not in struct") follows.
        reason = next((ln for ln in lines[1:] if ln.startswith("Key ")), "")
        head = f"{head} {reason}".strip()
    return head


# --------------------------------------------------------------------------------------------
# Compose-time compatibility checks. Configs declare what they work with; this reads it.
#
#   model.family                  one of encoder | decoder | encoder_decoder | lstm | hf ...
#   <node>.compatible_families    list of model families the node works with (objective,
#                                 adaptation, task, compression, probe ... any top-level node)
# --------------------------------------------------------------------------------------------


def check_config(cfg: DictConfig) -> None:
    family = OmegaConf.select(cfg, "model.family", default=None)
    if family is not None and family not in FAMILIES:
        raise ConfigError(f"model.family={family!r}: expected one of {', '.join(FAMILIES)}")
    for key in list(cfg.keys()):
        node = cfg.get(key)
        if not isinstance(node, DictConfig):
            continue
        _check_families(key, node, family)
        for sub_key in ("objectives",):  # combined objectives list their parts
            parts = node.get(sub_key) if sub_key in node else None
            if isinstance(parts, DictConfig):
                for part_name, part in parts.items():
                    if isinstance(part, DictConfig):
                        _check_families(f"{key}.{sub_key}.{part_name}", part, family)
    for check in CHECKS:
        check(cfg)


def _check_families(key: str, node: DictConfig, family: str | None) -> None:
    allowed = node.get("compatible_families") if "compatible_families" in node else None
    if allowed is None or family is None:
        return
    if family not in list(allowed):
        name = node.get("name", key) if "name" in node else key
        raise ConfigError(
            f"{key}={name} does not work with model family '{family}' "
            f"(model.family); valid families for {key}={name}: {', '.join(allowed)}"
        )

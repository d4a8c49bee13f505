"""The config registry on disk: where conf/ is and which groups and options it holds.

Torch-free and below both `ptmlab.config` (composing) and `ptmlab.config_schema` (type checks),
which each need the list of groups.
"""

from __future__ import annotations

from pathlib import Path

from ptmlab.settings import Settings

CONF_DIR: Path = Settings().conf_dir  # PTMLAB_CONF_DIR, read once: every composition uses the same registry

# Folders of conf/ that are not Hydra config groups: pipeline files are job graphs read by
# ptmlab.queue.pipelines (tests/platform/test_pipelines.py composes every job of each).
NOT_CONFIG_GROUPS = {"pipeline"}


def list_config_groups() -> dict[str, list[str]]:
    """Every config group (subfolders as `a/b`) and its options, for the catalogue endpoint."""
    groups: dict[str, list[str]] = {}
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        rel = path.relative_to(CONF_DIR)
        if len(rel.parts) == 1:
            continue  # primary config files (config.yaml)
        group, option = rel.parts[0], "/".join(rel.parts[1:])[: -len(".yaml")]
        if group in NOT_CONFIG_GROUPS:
            continue
        if option.startswith("_") or "/_" in option:
            continue  # private base files included by others
        groups.setdefault(group, []).append(option)
    return groups

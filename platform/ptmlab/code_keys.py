"""Config keys that select code, derived from conf/ itself (torch-free).

A job is data, but some of its config values are not: Hydra imports the class named by `_target_`
(and `_partial_`, `_args_`, `_recursive_`, `_convert_` change what it calls and how), and
`ptmlab.run` imports the stage function named by `stage.entry`. Whoever sets one of those picks
the Python code a worker runs, so no remote submission may set, append, force-set, replace or
delete one (ptmlab.api.validation), and the worker refuses a queued job that does
(ptmlab.worker.agent) in case a row reached the queue some other way.

The set is read from the configs, not listed by hand: every key of Hydra's reserved `_name_`
form, and every key whose value in some config file is a dotted path into an importable
top-level package (`entry: lightning_modules.stages.finetune.run_finetune`). A new config that
names code in a new key is covered the day it is added.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ptmlab.errors import ForbiddenOverrideError

# Hydra's instantiate keys (hydra.utils.instantiate): always code-selecting, found in conf/ or not.
HYDRA_INSTANTIATE_KEYS = frozenset({"_target_", "_partial_", "_args_", "_recursive_", "_convert_"})
_RESERVED_FORM = re.compile(r"^_[A-Za-z]+_$")
_DOTTED_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_PACKAGE_HEADER = re.compile(r"^#\s*@package\s+(\S+)", re.MULTILINE)


def names_python_object(value: Any) -> bool:
    """`a.b.c` whose first part is an importable top-level module (found, never imported)."""
    if not isinstance(value, str) or not _DOTTED_PATH.match(value):
        return False
    try:
        return importlib.util.find_spec(value.split(".", 1)[0]) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class CodeKeys:
    names: frozenset[str]  # key names that select code wherever they appear
    paths: frozenset[str]  # composed dotted paths of every such key in conf/ (`model.backbone._target_`)
    registered: dict[str, frozenset[str]]  # key name -> every value conf/ gives it (`entry` -> stage functions)

    def holds_code(self, dotted: str) -> str | None:
        """The first code path at or under `dotted` (`model` -> `model.backbone._target_`), or None."""
        if not dotted:
            return next(iter(sorted(self.paths)), None)
        for path in sorted(self.paths):
            if path == dotted or path.startswith(dotted + "."):
                return path
        return None


def _walk(node: Any, prefix: str = "") -> Iterator[tuple[str, str, Any]]:
    """(dotted path, key, value) of every mapping entry at any depth (list items as `[i]`)."""
    if isinstance(node, dict):
        for key, value in node.items():
            key = str(key)
            path = f"{prefix}.{key}" if prefix else key
            yield path, key, value
            yield from _walk(value, path)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{prefix}[{i}]")


def _package(conf_dir: Path, path: Path, text: str) -> str:
    """Where a file's keys land in the composed config: its `# @package`, else its top-level group
    (conf/config.yaml defaults select top-level groups: conf/task/glue/sst2.yaml lands under `task`)."""
    header = _PACKAGE_HEADER.search(text)
    if header:
        package = header.group(1)
        return "" if package == "_global_" else package
    rel = path.relative_to(conf_dir)
    return "" if len(rel.parts) == 1 else rel.parts[0]


def scan_conf(conf_dir: Path) -> CodeKeys:
    import yaml

    names: set[str] = set(HYDRA_INSTANTIATE_KEYS)
    found: list[tuple[str, str, Any]] = []
    for path in sorted(conf_dir.rglob("*.yaml")):
        rel = path.relative_to(conf_dir)
        if rel.parts[0] == "pipeline":
            continue  # job graphs, not configs: their overrides are checked like any other
        text = path.read_text()
        data = yaml.safe_load(text) or {}
        if not isinstance(data, dict):
            continue
        data = {k: v for k, v in data.items() if k not in ("defaults", "hydra")}
        package = _package(conf_dir, path, text)
        for dotted, key, value in _walk(data, package):
            if _RESERVED_FORM.match(key) or names_python_object(value):
                names.add(key)
            found.append((dotted, key, value))
    paths = {dotted for dotted, key, _ in found if key in names}
    registered: dict[str, set[str]] = {}
    for _, key, value in found:
        if key in names and isinstance(value, str):
            registered.setdefault(key, set()).add(value)
    return CodeKeys(frozenset(names), frozenset(paths), {k: frozenset(v) for k, v in registered.items()})


@lru_cache(maxsize=4)
def _cached(conf_dir: str) -> CodeKeys:
    return scan_conf(Path(conf_dir))


def code_keys(conf_dir: Path | None = None) -> CodeKeys:
    if conf_dir is None:
        from ptmlab.config import CONF_DIR

        conf_dir = CONF_DIR
    return _cached(str(Path(conf_dir).resolve()))


_VERB = {"CHANGE": "set", "ADD": "appended (+)", "FORCE_ADD": "force-set (++)", "DEL": "deleted (~)"}


def check_no_code_selection(override: str, parsed=None) -> None:
    """Refuse (ForbiddenOverrideError naming it) an override that sets, appends, force-sets,
    replaces or deletes a key that selects code, at any depth, or moves a node with `@`."""
    from ptmlab.config import list_config_groups

    if parsed is None:
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from hydra.errors import HydraException

        try:
            (parsed,) = OverridesParser.create().parse_overrides([override])
        except (HydraException, RecursionError):
            raise ForbiddenOverrideError(f"override {override[:200]!r}: does not parse") from None
    keys = code_keys()
    verb = _VERB.get(parsed.type.name, "set")
    for name in keys.names:
        # `_target_` anywhere, even as a plain value (but not inside a longer word: `my_args_x`)
        if name.startswith("_") and re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", override):
            raise ForbiddenOverrideError(
                f"override {override!r}: `{name}` selects code and may not be used in a submitted job"
            )
    if parsed.package is not None:
        raise ForbiddenOverrideError(
            f"override {override!r}: package overrides (`@`) may not be used in a submitted job "
            f"(they move config nodes, `_target_` included)"
        )
    key = parsed.key_or_group
    parts = re.split(r"[./]", key)
    if "hydra" in parts:
        raise ForbiddenOverrideError(f"override {override!r}: `hydra` settings may not be set in a submitted job")
    for part in parts:
        if part in keys.names:
            raise ForbiddenOverrideError(
                f"override {override!r}: `{part}` selects code (it names what a worker "
                f"imports or instantiates) and may not be {verb} in a submitted job"
            )
    dotted = key.replace("/", ".")
    held = keys.holds_code(dotted)
    if held is not None and parsed.is_delete():
        raise ForbiddenOverrideError(f"override {override!r}: deleting `{dotted}` deletes `{held}`, which selects code")
    if held is not None and key not in list_config_groups():
        # Choosing a group option picks from the registry; writing the node itself replaces its `_target_`.
        raise ForbiddenOverrideError(
            f"override {override!r}: `{dotted}` holds `{held}`, which selects code; "
            f"choose a config option instead (e.g. {dotted.split('.')[0]}=<option>)"
        )
    if parsed.is_delete():
        return
    for name in _dict_keys(parsed.value() if not parsed.is_sweep_override() else getattr(parsed.value(), "list", [])):
        if name in keys.names:
            raise ForbiddenOverrideError(
                f"override {override!r}: `{name}` selects code and may not be {verb} in a submitted job"
            )


def _dict_keys(value) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _dict_keys(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _dict_keys(v)


def code_selecting_override(overrides) -> str | None:
    """The refusal message for the first override that selects code, or None (the worker's check)."""
    for override in overrides:
        try:
            check_no_code_selection(override)
        except ForbiddenOverrideError as exc:
            return str(exc)
    return None

"""The option files of a group whose methods are declared once (`DECLARED_GROUPS`) are written from
the declarations: each file keeps its comment header, `name`, `_target_` and any value it chose on
purpose, and states every other declared key at its declared default, in the declaration's order
(in an objective's file, each `module` node it holds).
So a parameter added to a declaration reaches the YAML (where Hydra needs it to take an override
such as `adaptation.rank=16`) by running

    python -m ptmlab.declared_yaml          # rewrite conf/<group>/*.yaml
    python -m ptmlab.declared_yaml --check  # exit 1 naming each file that is not as written

and tests/lightning_modules/test_declarations_agree.py fails while a file differs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, cast

from omegaconf import OmegaConf

from ptmlab.config_groups import CONF_DIR
from ptmlab.config_schema import TARGETS

DECLARED_GROUPS = ("adaptation", "compression", "attack", "defence", "objective")
FIRST_KEYS = ("name", "_target_")
# Declared keys a file states only when it sets them (the platform reads them from the node).
OPTIONAL_KEYS = ("compatible_families",)


def _yaml_value(value: Any) -> str:
    text = OmegaConf.to_yaml(OmegaConf.create({"v": value})).strip()
    return text.removeprefix("v:").strip() if "\n" not in text else "[" + ", ".join(map(str, value)) + "]"


def _declared_node(node: dict[str, Any]) -> dict[str, Any]:
    """A `_target_` node's keys in the declaration's order, each declared key at the node's value or
    its declared default; other nodes as they are, their `_target_` nodes written the same way."""
    if "_target_" not in node:
        return {key: _declared_node(value) if isinstance(value, dict) else value for key, value in node.items()}
    schema = TARGETS[node["_target_"]]
    fields = {(f.alias or name): f for name, f in schema.model_fields.items()}
    out = {key: node[key] for key in FIRST_KEYS if key in node}
    for key, field in fields.items():
        if key in FIRST_KEYS or (key in OPTIONAL_KEYS and key not in node):
            continue
        out[key] = node[key] if key in node else field.get_default(call_default_factory=True)
    out.update({key: value for key, value in node.items() if key not in fields})
    return out


def _lines(node: dict[str, Any], indent: str = "") -> list[str]:
    out = []
    for key, value in node.items():
        if isinstance(value, dict) and value:
            out += [f"{indent}{key}:", *_lines(value, indent + "  ")]
        else:
            out.append(f"{indent}{key}: {_yaml_value(value)}")
    return out


def declared_yaml(path: Path) -> str:
    """The text `path` should have (its header and chosen values kept)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = [line for line in lines[: next((i for i, ln in enumerate(lines) if not ln.startswith("#")), 0)]]
    node = cast(dict[str, Any], OmegaConf.to_container(OmegaConf.load(path), resolve=False))
    return "\n".join([*header, *_lines(_declared_node(node))]) + "\n"


def option_files() -> list[Path]:
    return [p for group in DECLARED_GROUPS for p in sorted((CONF_DIR / group).glob("*.yaml"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ptmlab.declared_yaml", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file differs")
    args = parser.parse_args(argv)
    stale = [p for p in option_files() if p.read_text(encoding="utf-8") != declared_yaml(p)]
    if args.check:
        for path in stale:
            print(f"{path}: not as its declaration writes it (python -m ptmlab.declared_yaml)", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(declared_yaml(path), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

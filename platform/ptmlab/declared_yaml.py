"""The option files of a group whose methods are declared once (`DECLARED_GROUPS`) are written from
the declarations: each file keeps its comment header, `name`, `_target_` and any value it chose on
purpose, and states every other declared key at its declared default, in the declaration's order.
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

DECLARED_GROUPS = ("adaptation", "compression", "attack", "defence")
FIRST_KEYS = ("name", "_target_")
# Declared keys a file states only when it sets them (the platform reads them from the node).
OPTIONAL_KEYS = ("compatible_families",)


def _yaml_value(value: Any) -> str:
    text = OmegaConf.to_yaml(OmegaConf.create({"v": value})).strip()
    return text.removeprefix("v:").strip() if "\n" not in text else "[" + ", ".join(map(str, value)) + "]"


def declared_yaml(path: Path) -> str:
    """The text `path` should have (its header and chosen values kept)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = [line for line in lines[: next((i for i, ln in enumerate(lines) if not ln.startswith("#")), 0)]]
    node = cast(dict[str, Any], OmegaConf.to_container(OmegaConf.load(path), resolve=False))
    schema = TARGETS[node["_target_"]]
    fields = {(f.alias or name): f for name, f in schema.model_fields.items()}
    out = [*header, *(f"{key}: {_yaml_value(node[key])}" for key in FIRST_KEYS)]
    for key, field in fields.items():
        if key in FIRST_KEYS or (key in OPTIONAL_KEYS and key not in node):
            continue
        value = node[key] if key in node else field.get_default(call_default_factory=True)
        out.append(f"{key}: {_yaml_value(value)}")
    out += [f"{key}: {_yaml_value(value)}" for key, value in node.items() if key not in fields]
    return "\n".join(out) + "\n"


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

#!/usr/bin/env python3
"""Generate the model × objective compatibility table from the configs (torch-free).

Reads `family` of every conf/model/*.yaml and `compatible_families` of every
conf/objective/*.yaml (the same keys `ptmlab.config.check_config` enforces at compose time) and
writes a Markdown table into the docs' pre-training page (docs/guide/pretraining.md) between
the markers

    <!-- compat-table:start -->
    <!-- compat-table:end -->

Usage: python scripts/compat_table.py            print the table
       python scripts/compat_table.py --write    rewrite the page's section
       python scripts/compat_table.py --check    exit 1 if the page's section is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from omegaconf import OmegaConf

from ptmlab.contracts.families import FAMILIES

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guide" / "pretraining.md"
START, END = "<!-- compat-table:start -->", "<!-- compat-table:end -->"
FAMILY_ORDER = list(FAMILIES)  # the columns, in the vocabulary's order


def _load(folder: Path) -> dict[str, object]:
    return {p.stem: OmegaConf.load(p) for p in sorted(folder.glob("*.yaml")) if not p.stem.startswith("_")}


def models_by_family(conf_dir: Path) -> dict[str, list[str]]:
    families: dict[str, list[str]] = {}
    for name, node in _load(conf_dir / "model").items():
        families.setdefault(str(node.get("family")), []).append(name)
    return families


def render(conf_dir: Path = ROOT / "conf") -> str:
    families = models_by_family(conf_dir)
    objectives = _load(conf_dir / "objective")
    ordered = [f for f in FAMILY_ORDER if f in families] + sorted(set(families) - set(FAMILY_ORDER))
    # Families that only objectives mention (no model config yet) still get a column.
    mentioned = {str(f) for node in objectives.values() for f in (node.get("compatible_families") or [])}
    ordered += sorted(mentioned - set(ordered))
    lines = ["| objective | " + " | ".join(f"`{f}`" for f in ordered) + " |", "|---|" + "---|" * len(ordered)]
    for name, node in objectives.items():
        allowed = node.get("compatible_families")
        allowed = set(map(str, allowed)) if allowed is not None else set(ordered)
        lines.append(f"| `{name}` | " + " | ".join("✓" if f in allowed else "·" for f in ordered) + " |")
    lines += ["", "| family | model configs |", "|---|---|"]
    for f in ordered:
        models = ", ".join(f"`{m}`" for m in families.get(f, [])) or "(none yet)"
        lines.append(f"| `{f}` | {models} |")
    return "\n".join(lines) + "\n"


def splice(readme: str, table: str) -> str:
    if START not in readme or END not in readme:
        raise SystemExit(f"the page has no {START} ... {END} section")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the page's section")
    mode.add_argument("--check", action="store_true", help="exit 1 if the page's section is out of date")
    parser.add_argument("--readme", type=Path, default=PAGE, help="the Markdown file holding the markers")
    args = parser.parse_args(argv)
    table = render()
    if not (args.write or args.check):
        sys.stdout.write(table)
        return 0
    readme = args.readme.read_text(encoding="utf-8")
    updated = splice(readme, table)
    if args.check:
        if updated != readme:
            print(
                f"{args.readme} compatibility table is out of date: run python scripts/compat_table.py --write",
                file=sys.stderr,
            )
            return 1
        return 0
    args.readme.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

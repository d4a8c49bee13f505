"""The science half knows nothing of the platform: every module of lightning_modules imports
ptmlab only through the torch-free shared leaves, `ptmlab.contracts` (errors, typed summaries) and
`ptmlab.methods` (each method's declaration of its parameters).
Imports are read from the source (module level and inside functions alike), not executed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "lightning_modules"
ALLOWED = ("ptmlab.contracts", "ptmlab.methods")


def ptmlab_imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names if node.module == "ptmlab"]
        else:
            continue
        for name in names:
            if name == "ptmlab" and isinstance(node, ast.ImportFrom):
                continue  # `from ptmlab import x`: judged by the `ptmlab.x` entries
            if name == "ptmlab" or name.startswith("ptmlab."):
                found.append((node.lineno, name))
    return found


MODULES = sorted(ROOT.rglob("*.py"))


def test_the_walk_sees_every_module():
    assert len(MODULES) > 50


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_lightning_modules_imports_only_the_shared_leaf(path):
    bad = [
        (line, name)
        for line, name in ptmlab_imports(path)
        if not any(name == a or name.startswith(a + ".") for a in ALLOWED)
    ]
    assert not bad, (
        f"{path.relative_to(ROOT.parent)} imports {', '.join(f'{n} (line {ln})' for ln, n in bad)}; "
        f"lightning_modules may import only {', '.join(ALLOWED)}"
    )


def test_the_check_catches_a_forbidden_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    from ptmlab.settings import get_settings\n    import ptmlab.config\n"
        "from ptmlab import leaderboard\nfrom ptmlab.contracts import ConfigError\n"
        "from ptmlab.config_schema import TARGETS\n"
    )
    found = sorted(n for _, n in ptmlab_imports(module))
    assert found == [
        "ptmlab.config",
        "ptmlab.config_schema",
        "ptmlab.contracts",
        "ptmlab.leaderboard",
        "ptmlab.settings",
    ]
    assert [n for n in found if not any(n == a or n.startswith(a + ".") for a in ALLOWED)] == [
        "ptmlab.config",
        "ptmlab.config_schema",
        "ptmlab.leaderboard",
        "ptmlab.settings",
    ]

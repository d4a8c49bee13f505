"""Imports only go down: no import cycle (a strongly connected set of modules) in lightning_modules
or platform/ptmlab; lightning_modules' packages import only their own modules and the packages of
lower layers (LAYERS, the order ARCHITECTURE.md §3 documents; `stages` on top); platform/ptmlab
reaches lightning_modules only through its bridge, `ptmlab.science`. Imports are read from the
source, never executed: module level and inside functions alike (a function-level import is still a
dependency), and string imports: in a module that calls `importlib.import_module` or `__import__`,
every string naming a module of either root counts as an import of it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"lightning_modules": REPO / "lightning_modules", "ptmlab": REPO / "platform" / "ptmlab"}
STAGES = "lightning_modules.stages"

Edge = tuple[str, int]  # (file, line) of the import that makes it

# lightning_modules' packages, top layer first; a package imports its own modules and any package of
# a later entry (packages in one entry do not import each other). ARCHITECTURE.md §3 shows the same.
LAYERS = [
    ("stages",),
    ("attacks",),
    ("compression", "probing"),
    ("runtime",),
    ("artifacts",),
    ("heads",),
    ("adaptation",),
    ("objectives",),
    ("tasks",),
    ("models",),
    ("data",),
    ("optim",),
]
BRIDGE = "ptmlab.science"  # the platform's one way into the science half
STRING_IMPORTERS = ("import_module", "__import__")


def module_files(roots: dict[str, Path]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under each root (a package is its __init__)."""
    modules = {}
    for package, root in roots.items():
        for path in sorted(root.rglob("*.py")):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _imported_names(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([base] if base else []))
    # `from a import b`: b may be a module of package a, or a name defined in a
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def import_graph(roots: dict[str, Path]) -> dict[str, dict[str, Edge]]:
    """module -> {module it imports: where}, within the roots."""
    modules = module_files(roots)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, Edge]] = {m: {} for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        imports_by_string = any(
            isinstance(node, ast.Call)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in STRING_IMPORTERS
            for node in ast.walk(tree)
        )
        for node in ast.walk(tree):
            names = _imported_names(node, module, path.name == "__init__.py")
            if imports_by_string and isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value] if known(node.value) == node.value else []
            for name in names:
                target = known(name)
                # a module's own packages are imported with it, not by it
                if target and target != module and not module.startswith(target + "."):
                    graph[module].setdefault(
                        target, (str(path.relative_to(REPO) if path.is_relative_to(REPO) else path), node.lineno)
                    )
    return graph


def import_cycles(graph: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def describe_cycle(graph: dict[str, dict[str, Edge]], component: list[str]) -> str:
    """One loop through the component, each step with the file and line of its import."""
    members, first = set(component), component[0]
    path, seen = [first], {first}
    while True:  # walk inside the component until a module repeats
        node = path[-1]
        nxt = next((t for t in sorted(graph[node]) if t in members and t not in seen), None) or next(
            t for t in sorted(graph[node]) if t in members
        )
        if nxt in seen:
            path = path[path.index(nxt) :] + [nxt]
            break
        path.append(nxt)
        seen.add(nxt)
    steps = [f"{a} ({graph[a][b][0]}:{graph[a][b][1]})" for a, b in zip(path, path[1:])]
    return " -> ".join(steps + [path[-1]]) + (
        f" [{len(component)} modules in the cycle: {', '.join(component)}]" if len(component) > len(path) - 1 else ""
    )


def stage_imports_from_below(graph: dict[str, dict[str, Edge]]) -> list[str]:
    """`module -> stages module (file:line)` for every module of lightning_modules outside stages/."""

    def in_stages(module: str) -> bool:
        return module == STAGES or module.startswith(STAGES + ".")

    return [
        f"{module} -> {target} ({where[0]}:{where[1]})"
        for module, targets in sorted(graph.items())
        if module.startswith("lightning_modules.") and not in_stages(module)
        for target, where in sorted(targets.items())
        if in_stages(target)
    ]


def layer_of(module: str) -> int | None:
    """The LAYERS index of a lightning_modules module's package (None: not in lightning_modules or
    a package LAYERS does not place)."""
    parts = module.split(".")
    if parts[0] != "lightning_modules" or len(parts) < 2:
        return None
    return next((i for i, layer in enumerate(LAYERS) if parts[1] in layer), None)


def layer_violations(graph: dict[str, dict[str, Edge]]) -> list[str]:
    """`module -> target (file:line)` for each import of lightning_modules that does not go down."""
    found = []
    for module, targets in sorted(graph.items()):
        if not module.startswith("lightning_modules."):
            continue
        for target, where in sorted(targets.items()):
            if not target.startswith("lightning_modules.") or target.split(".")[1] == module.split(".")[1]:
                continue
            here, there = layer_of(module), layer_of(target)
            if here is None or there is None or there <= here:
                found.append(f"{module} -> {target} ({where[0]}:{where[1]})")
    return found


def platform_imports_of_science(graph: dict[str, dict[str, Edge]]) -> list[str]:
    return [
        f"{module} -> {target} ({where[0]}:{where[1]})"
        for module, targets in sorted(graph.items())
        if module.startswith("ptmlab") and module != BRIDGE
        for target, where in sorted(targets.items())
        if target.startswith("lightning_modules")
    ]


GRAPH = import_graph(ROOTS)


def test_the_walk_sees_both_halves():
    assert sum(m.startswith("lightning_modules.") for m in GRAPH) > 50
    assert sum(m.startswith("ptmlab.") for m in GRAPH) > 50
    assert "lightning_modules.heads.pooling" in GRAPH["lightning_modules.heads.task_model"]


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_no_import_cycle(package):
    cycles = [c for c in import_cycles(GRAPH) if any(m == package or m.startswith(package + ".") for m in c)]
    assert not cycles, (
        "import cycle: "
        + "; ".join(describe_cycle(GRAPH, c) for c in cycles)
        + ". Imports only go down: move what both need into the lower module (ARCHITECTURE.md)"
    )


def test_nothing_below_stages_imports_stages():
    upward = stage_imports_from_below(GRAPH)
    assert not upward, (
        "lightning_modules.stages is the top layer, imported by nothing else in lightning_modules: " + "; ".join(upward)
    )


def test_every_package_of_lightning_modules_has_a_layer():
    packages = {p.name for p in ROOTS["lightning_modules"].iterdir() if (p / "__init__.py").is_file()}
    packages |= {p.stem for p in ROOTS["lightning_modules"].glob("*.py") if p.stem != "__init__"}
    placed = {name for layer in LAYERS for name in layer}
    assert packages == placed, f"place each package in LAYERS (and ARCHITECTURE.md §3): {sorted(packages ^ placed)}"


def test_lightning_modules_imports_only_go_down_the_layers():
    upward = layer_violations(GRAPH)
    assert not upward, "imports that do not go down LAYERS (ARCHITECTURE.md §3): " + "; ".join(upward)


def test_the_platform_reaches_the_science_half_only_through_its_bridge():
    crossing = platform_imports_of_science(GRAPH)
    assert not crossing, f"platform/ptmlab imports lightning_modules outside {BRIDGE}: " + "; ".join(crossing)
    assert any(t.startswith("lightning_modules.stages") for t in GRAPH[BRIDGE]), "the bridge imports the stages"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_check_catches_a_planted_cycle(tmp_path):
    _write(
        tmp_path / "lightning_modules",
        {
            "__init__.py": "",
            "heads/__init__.py": "",
            "heads/pooling.py": "from lightning_modules.heads.task_model import TaskModel\n",
            "heads/task_model.py": "import torch\n\n\ndef build():\n    from . import pooling\n",  # inside a function
            "heads/evaluation.py": "from lightning_modules.heads import pooling\n",  # imports into the cycle: not in it
        },
    )
    graph = import_graph({"lightning_modules": tmp_path / "lightning_modules"})
    cycles = import_cycles(graph)
    assert cycles == [["lightning_modules.heads.pooling", "lightning_modules.heads.task_model"]]
    message = describe_cycle(graph, cycles[0])
    assert message.startswith("lightning_modules.heads.pooling (")
    assert "task_model.py:5) -> lightning_modules.heads.pooling" in message


def test_the_check_catches_a_planted_upward_import(tmp_path):
    _write(
        tmp_path / "lightning_modules",
        {
            "__init__.py": "",
            "stages/__init__.py": "",
            "stages/finetune.py": "from lightning_modules.heads.task_model import TaskModel\n",  # down: fine
            "stages/probe.py": "from lightning_modules.stages.finetune import run\n",  # within stages: fine
            "heads/__init__.py": "",
            "heads/pooling.py": "def pool():\n    from lightning_modules.stages import finetune\n",
            "heads/task_model.py": "",
            "compression/__init__.py": "",
            "compression/base.py": "import lightning_modules.stages\n",
        },
    )
    graph = import_graph({"lightning_modules": tmp_path / "lightning_modules"})
    assert [entry.split(" (")[0] for entry in stage_imports_from_below(graph)] == [
        "lightning_modules.compression.base -> lightning_modules.stages",
        "lightning_modules.heads.pooling -> lightning_modules.stages",  # `from stages import finetune` imports both
        "lightning_modules.heads.pooling -> lightning_modules.stages.finetune",
    ]
    assert import_cycles(graph) == []


def test_the_check_catches_planted_layer_and_string_imports(tmp_path):
    _write(
        tmp_path / "lightning_modules",
        {
            "__init__.py": "",
            "heads/__init__.py": "",
            "heads/pooling.py": "from lightning_modules.models.base import Backbone\n",  # down: fine
            "models/__init__.py": "",
            "models/base.py": "def f():\n    from lightning_modules.tasks import spec\n",  # up: models is below tasks
            "tasks/__init__.py": "",
            "tasks/spec.py": "",
        },
    )
    _write(
        tmp_path / "ptmlab",
        {
            "__init__.py": "",
            "science.py": "import lightning_modules.heads.pooling\n",  # the bridge: fine
            "worker.py": 'import importlib\nPRELOAD = ("json", "lightning_modules.tasks.spec")\n'
            "for n in PRELOAD:\n    importlib.import_module(n)\n",
        },
    )
    graph = import_graph({"lightning_modules": tmp_path / "lightning_modules", "ptmlab": tmp_path / "ptmlab"})
    assert [e.split(" (")[0] for e in layer_violations(graph)] == [
        "lightning_modules.models.base -> lightning_modules.tasks",
        "lightning_modules.models.base -> lightning_modules.tasks.spec",
    ]
    assert [e.split(" (")[0] for e in platform_imports_of_science(graph)] == [
        "ptmlab.worker -> lightning_modules.tasks.spec"
    ]

"""Run `ptmlab <args>` with only the distributions the API image installs importable:
docker/requirements-api.txt and what they require (plus ptmlab itself). Anything else (torch,
lightning, transformers, a dependency missing from the list, and lightning_modules, which the
image does not copy) raises ModuleNotFoundError when imported, as it would in the slim image;
optional imports (`try: import x`) carry on as there.

    python tests/platform/slim_api.py serve --port 8765
"""

from __future__ import annotations

import importlib.metadata as md
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REQUIREMENTS = Path(__file__).resolve().parents[2] / "docker" / "requirements-api.txt"
NOT_COPIED = {"lightning_modules"}  # parts of the ptmlab distribution the API image leaves out


def read_requirements(path: Path = REQUIREMENTS) -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def installable_closure(requirements: list[Requirement]) -> set[str]:
    """Canonical names of the listed distributions and everything they require (extras and
    environment markers honoured), as pip would install them."""
    seen: set[tuple[str, frozenset[str]]] = set()
    stack = list(requirements)
    while stack:
        req = stack.pop()
        key = (canonicalize_name(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            continue  # not installed here, so nothing can import it in this process either
        for text in dist.requires or []:
            child = Requirement(text)
            if child.marker is None or any(child.marker.evaluate({"extra": e}) for e in {"", *req.extras}):
                stack.append(child)
    return {name for name, _ in seen} | {"ptmlab"}


class OnlyImageDistributions:
    """A meta-path finder that refuses top-level modules of distributions outside `allowed`."""

    def __init__(self, allowed: set[str]):
        self.allowed = allowed
        self.owners = {top: {canonicalize_name(d) for d in dists} for top, dists in md.packages_distributions().items()}

    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in NOT_COPIED:
            raise ModuleNotFoundError(
                f"No module named {top!r} in the API image (docker/Dockerfile.api does not copy it)", name=top
            )
        owners = self.owners.get(top)
        if owners and not owners & self.allowed:
            raise ModuleNotFoundError(
                f"No module named {top!r} in the API image (distribution {', '.join(sorted(owners))} "
                f"is not in docker/requirements-api.txt)",
                name=top,
            )
        return None


def install() -> set[str]:
    allowed = installable_closure(read_requirements())
    sys.meta_path.insert(0, OnlyImageDistributions(allowed))
    return allowed


if __name__ == "__main__":
    install()
    from ptmlab.cli import main

    main(sys.argv[1:])

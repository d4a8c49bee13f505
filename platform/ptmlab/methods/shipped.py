"""What a file read from disk may name as code: only the classes ptmlab ships for that slot.

An export's `ptmlab_model.yaml`, a task model's manifest, a backbone's `ptmlab_backbone.json` and a
run's stored `config.yaml` are written by ptmlab, but whoever can write a folder under a root (or
create an MLflow run whose artifacts live where they choose) can write them too, and
`hydra.utils.instantiate` calls whatever `_target_` they hold, at any depth. So before a node from
such a file is instantiated, every `_target_` in it must be one of the declarations ptmlab.methods
holds for its slot (the backbone classes of conf/model/, the objectives, the readers, ...); nested
nodes may name any shipped class; Hydra's other instantiate keys and OmegaConf resolver calls
(`${oc.env:...}` would copy the worker's environment into the run) are refused outright. A node
that passes names nothing a submitted config could not have named.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ptmlab.contracts.errors import UntrustedCodeError
from ptmlab.methods.adaptation import ADAPTATIONS
from ptmlab.methods.attacks import ATTACKS
from ptmlab.methods.compression import COMPRESSIONS
from ptmlab.methods.defences import DEFENCES
from ptmlab.methods.models import BACKBONES
from ptmlab.methods.objectives import OBJECTIVES
from ptmlab.methods.readers import CORPORA, READERS
from ptmlab.methods.training import OPTIMIZERS, SCHEDULERS, TRAINERS

# The slot a node fills -> the classes ptmlab ships for it.
SLOTS: dict[str, frozenset[str]] = {
    # Besides conf/model's classes: what exports name (ELECTRA keeps its discriminator, a generation
    # task's Hugging Face checkpoint its LM head).
    "backbone": frozenset(BACKBONES)
    | {"lightning_modules.models.electra.ElectraEncoder", "lightning_modules.models.hf_generator.HFGenerator"},
    "objective": frozenset(OBJECTIVES),
    "reader": frozenset(READERS),
    "corpus": frozenset(CORPORA),
    "adaptation": frozenset(ADAPTATIONS),
}
SHIPPED: frozenset[str] = frozenset().union(
    *SLOTS.values(), ATTACKS, COMPRESSIONS, DEFENCES, OPTIMIZERS, SCHEDULERS, TRAINERS
)
# Hydra's instantiate keys other than `_target_` change what is called and how.
_CALL_KEYS = frozenset({"_args_", "_partial_", "_recursive_", "_convert_"})
_RESOLVER_CALL = re.compile(r"\$\{\s*[\w.\-]+\s*:")


def _entries(node: Any, path: str) -> Iterator[tuple[str, str, Any]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            dotted = f"{path}.{key}" if path else str(key)
            yield dotted, str(key), value
            yield from _entries(value, dotted)
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            yield from _entries(value, f"{path}[{i}]")


def check_shipped_code(node: Any, source: str, slot: str | None = None, path: str = "") -> None:
    """Raise UntrustedCodeError naming `source` (the file) and the key when `node` (a plain dict/list
    as read from the file, or an OmegaConf container) names code ptmlab does not ship for `slot`
    (None: any shipped class), at any depth."""
    if type(node).__module__.startswith("omegaconf"):  # never iterate one: that would resolve it
        node = _plain(node)
    top_target = node.get("_target_") if isinstance(node, Mapping) else None
    if slot is not None and top_target is not None and top_target not in SLOTS[slot]:
        raise UntrustedCodeError(
            f"{source}: {path or slot}._target_={str(top_target)[:200]!r} is not a class ptmlab "
            f"ships for `{slot}`; refusing to load it"
        )
    for dotted, key, value in _entries(node, path):
        if key == "_target_" and value not in SHIPPED:
            raise UntrustedCodeError(
                f"{source}: {dotted}={str(value)[:200]!r} is not a class ptmlab ships; refusing to load it"
            )
        if key in _CALL_KEYS:
            raise UntrustedCodeError(f"{source}: {dotted}: `{key}` is not allowed in a stored model or config")
        if isinstance(value, str) and _RESOLVER_CALL.search(value):
            raise UntrustedCodeError(
                f"{source}: {dotted}={value[:200]!r}: resolver interpolations are not allowed "
                f"in a stored model or config"
            )


def _plain(node: Any) -> Any:
    """An OmegaConf container as plain data, interpolations left as written (never resolved here)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node, resolve=False)

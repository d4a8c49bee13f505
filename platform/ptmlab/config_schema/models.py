"""`model`: the model node; its `backbone` is declared by its class in ptmlab.methods.models."""

from __future__ import annotations

from typing import Literal

from ptmlab.contracts.families import FAMILIES
from ptmlab.methods.fields import Name, Node, TargetSlot

Family = Literal[FAMILIES]  # type: ignore[valid-type]  # the one vocabulary of model families, the tuple spelled once


class ModelNode(Node):
    name: Name
    family: Family  # one of ptmlab.contracts.families.FAMILIES; read by the compatibility checks
    name_or_path: str | None = None  # family hf: a Hub name, a folder or pypi:<package>
    backbone: TargetSlot

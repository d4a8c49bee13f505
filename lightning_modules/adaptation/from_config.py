"""The adaptation mode an `adaptation` config node names, built (full fine-tuning when none)."""

from __future__ import annotations

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from lightning_modules.adaptation.base import Adaptation
from lightning_modules.adaptation.full import FullFineTuning
from ptmlab.methods.validation import declared

NON_ARGUMENT_KEYS = ("name", "compatible_families")
SAVED_STATE_KEYS = ("merged", "resolved")  # written by a mode's saved_node, not declared


def build_adaptation(adaptation_cfg: DictConfig | None) -> Adaptation:
    """A mode whose constructor takes its declaration (`takes_declaration`) gets the node validated
    into it (with the state a saved task model adds, `merged`, beside it); the others their
    arguments through Hydra's `instantiate`."""
    if adaptation_cfg is None:
        return FullFineTuning()
    node = OmegaConf.to_container(adaptation_cfg, resolve=True)
    mode = get_class(node["_target_"])
    if getattr(mode, "takes_declaration", False):
        state = {key: node.pop(key) for key in SAVED_STATE_KEYS if key in node}
        return mode(declared(mode.declaration, node, "adaptation"), **state)
    for key in NON_ARGUMENT_KEYS:
        node.pop(key, None)
    return instantiate(node)

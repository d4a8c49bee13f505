"""The adaptation mode an `adaptation` config node names, built (full fine-tuning when none)."""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from lightning_modules.adaptation.base import Adaptation
from lightning_modules.adaptation.full import FullFineTuning

NON_ARGUMENT_KEYS = ("name", "compatible_families")


def build_adaptation(adaptation_cfg: DictConfig | None) -> Adaptation:
    if adaptation_cfg is None:
        return FullFineTuning()
    node = OmegaConf.to_container(adaptation_cfg, resolve=True)
    for key in NON_ARGUMENT_KEYS:
        node.pop(key, None)
    return instantiate(node)

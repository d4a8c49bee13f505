"""Exporting a trained backbone so later stages (finetune, compress, probe) can load it.

Layout of `<run dir>/export/` (also logged to MLflow as the `export` artifact):
    ptmlab_model.yaml   the `model` config node (name, family, backbone `_target_` + args)
    backbone.pt         the backbone's state_dict
    tokenizer files     `PreTrainedTokenizerFast.save_pretrained`
    hf/                 the same weights as a Hugging Face model, where a counterpart exists
"""

from __future__ import annotations

from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptmlab.errors import BackboneError

MODEL_FILE = "ptmlab_model.yaml"
WEIGHTS_FILE = "backbone.pt"


def export_backbone(backbone: torch.nn.Module, model_cfg: DictConfig, tokenizer, out_dir: Path,
                    vocab_size: int) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if getattr(backbone, "family", None) == "hf":
        return _export_hf_backbone(backbone, model_cfg, tokenizer, out_dir)
    cfg = OmegaConf.to_container(model_cfg, resolve=True)
    cfg["backbone"]["vocab_size"] = vocab_size
    export_hook = getattr(backbone, "export_backbone", None)
    if callable(export_hook):  # a backbone that keeps only a part (ELECTRA: its discriminator) says which, and its config
        backbone, cfg = export_hook(cfg)
    OmegaConf.save(OmegaConf.create(cfg), out_dir / MODEL_FILE)
    torch.save(backbone.state_dict(), out_dir / WEIGHTS_FILE)
    tokenizer.save_pretrained(str(out_dir))
    to_hf = getattr(backbone, "to_hf", None)
    hf_model = to_hf() if callable(to_hf) else None  # None: no Hugging Face counterpart
    if hf_model is not None:
        hf_model.save_pretrained(str(out_dir / "hf"))
        tokenizer.save_pretrained(str(out_dir / "hf"))
    return out_dir


def _export_hf_backbone(backbone, model_cfg: DictConfig, tokenizer, out_dir: Path) -> Path:
    """A Hugging Face backbone (fine-tuned, say) is exported in its own format under hf/;
    ptmlab_model.yaml points at that folder, relative to the export."""
    backbone.save_hf(out_dir / "hf")
    tokenizer.save_pretrained(str(out_dir / "hf"))
    tokenizer.save_pretrained(str(out_dir))
    cfg = {"name": str(model_cfg.get("name", "hf")), "family": "hf",
           "backbone": {"_target_": "lightning_modules.models.hf.HFBackbone", "name_or_path": "hf"}}
    OmegaConf.save(OmegaConf.create(cfg), out_dir / MODEL_FILE)
    return out_dir


def load_exported_backbone(export_dir: Path):
    """(backbone, model_cfg, tokenizer) from an export folder."""
    from transformers import AutoTokenizer

    export_dir = Path(export_dir)
    if not (export_dir / MODEL_FILE).exists():
        raise BackboneError(f"no exported backbone in {export_dir} (missing {MODEL_FILE})")
    model_cfg = OmegaConf.load(export_dir / MODEL_FILE)
    if model_cfg.get("family") == "hf":  # weights live in hf/, in Hugging Face's own format
        backbone = instantiate(model_cfg.backbone, name_or_path=str(export_dir / model_cfg.backbone.name_or_path))
    else:
        backbone = instantiate(model_cfg.backbone)
        state = torch.load(export_dir / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        backbone.load_state_dict(state)
    tokenizer = AutoTokenizer.from_pretrained(str(export_dir), use_fast=True)
    return backbone, model_cfg, tokenizer

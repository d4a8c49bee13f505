"""Exporting a trained backbone so later stages (finetune, compress, probe) can load it.

Layout of `<run dir>/export/` (also logged to MLflow as the `export` artifact):
    ptmlab_model.yaml   the `model` config node (name, family, backbone `_target_` + args)
    backbone.pt         the backbone's state_dict
    tokenizer files     `PreTrainedTokenizerFast.save_pretrained`
    hf/                 the same weights as a Hugging Face model, where a counterpart exists
    lm_head.json        the pre-training objective's LM head, where prompt-based modes can use it
                        (adaptation/lm_head.py): {"kind": "mlm", sizes...} or {"kind": "causal"}
    lm_head.safetensors its weights (kind mlm: dense, layer_norm, bias; the decoder is the tied
                        input embedding, in backbone.pt)
    ptmlab_backbone.json what this backbone is, for the runs that load it (`write_backbone_manifest`):
                        model, family, the objective, tokenizer and corpus it was trained with
                        (names and config nodes), parameters, vocabulary, and the run that made it
                        (stage, job id, MLflow run, run folder, seed)
"""

from __future__ import annotations

from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from lightning_modules.adaptation.lm_head import LM_HEAD_SPEC, LM_HEAD_WEIGHTS, mlm_head_spec
from lightning_modules.objectives.clm import CausalLMObjective
from lightning_modules.objectives.mlm import MaskedLMObjective
from ptmlab.contracts import BackboneError
from ptmlab.methods.shipped import check_shipped_code

MODEL_FILE = "ptmlab_model.yaml"
WEIGHTS_FILE = "backbone.pt"
BACKBONE_MANIFEST = "ptmlab_backbone.json"


def write_backbone_manifest(out_dir: Path, record: dict) -> Path:
    """Write what a backbone is (see the module docstring) beside its weights: a fine-tune, a
    multi-task run or a probe that loads it records this instead of its own unused defaults."""
    import json

    path = Path(out_dir) / BACKBONE_MANIFEST
    path.write_text(json.dumps(record, indent=2, default=str))
    return path


def read_backbone_manifest(export_dir: Path) -> dict | None:
    """The manifest of an export folder; None for exports made before it was written."""
    import json

    path = Path(export_dir) / BACKBONE_MANIFEST
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        return None
    configs = data.get("configs") or {}  # record_backbone makes these the run's own groups
    check_shipped_code(configs.get("objective") or {}, str(path), path="configs.objective")
    check_shipped_code(
        (configs.get("data") or {}).get("corpus") or {}, str(path), slot="corpus", path="configs.data.corpus"
    )
    check_shipped_code(configs, str(path), path="configs")
    return data


def export_backbone(
    backbone: torch.nn.Module, model_cfg: DictConfig, tokenizer, out_dir: Path, vocab_size: int
) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = OmegaConf.to_container(model_cfg, resolve=True)
    if "backbone" in cfg:
        cfg["backbone"]["vocab_size"] = vocab_size
    # A backbone that keeps only a part (ELECTRA: its discriminator) says which, and its config; a
    # Hugging Face backbone gives a config that reloads it from hf/.
    backbone, cfg = backbone.export_backbone(cfg)
    OmegaConf.save(OmegaConf.create(cfg), out_dir / MODEL_FILE)
    hf_model = backbone.to_hf()  # None: no Hugging Face counterpart
    if not backbone.hf_native:  # a Hugging Face backbone's weights are hf/ alone
        torch.save(backbone.state_dict(), out_dir / WEIGHTS_FILE)
    tokenizer.save_pretrained(str(out_dir))
    if hf_model is not None:
        hf_model.save_pretrained(str(out_dir / "hf"))
        tokenizer.save_pretrained(str(out_dir / "hf"))
    return out_dir


def export_lm_head(objectives: dict, backbone: torch.nn.Module, out_dir: Path) -> dict | None:
    """Write the LM head of the first objective that has one a prompt can use: a masked-LM
    objective's head (its variants included), or a causal-LM objective's tied decoder. Returns
    its spec (None: no such objective, nothing written)."""
    import json

    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    spec = None
    for objective in objectives.values():
        if isinstance(objective, MaskedLMObjective) and not backbone.is_causal:
            spec = mlm_head_spec(backbone)
            save_file(
                {k: v.detach().contiguous().cpu() for k, v in objective.head.state_dict().items()},
                str(out_dir / LM_HEAD_WEIGHTS),
            )
            break
        if isinstance(objective, CausalLMObjective) and objective.project is None:
            spec = {"kind": "causal"}
            break
    if spec is not None:
        (out_dir / LM_HEAD_SPEC).write_text(json.dumps(spec, indent=2))
    return spec


def load_exported_backbone(export_dir: Path):
    """(backbone, model_cfg, tokenizer) from an export folder."""
    from transformers import AutoTokenizer

    export_dir = Path(export_dir)
    if not (export_dir / MODEL_FILE).exists():
        raise BackboneError(f"no exported backbone in {export_dir} (missing {MODEL_FILE})")
    model_cfg = OmegaConf.load(export_dir / MODEL_FILE)
    check_shipped_code(model_cfg.get("backbone"), str(export_dir / MODEL_FILE), slot="backbone", path="backbone")
    check_shipped_code(model_cfg, str(export_dir / MODEL_FILE))
    if "name_or_path" in model_cfg.backbone:  # weights in Hugging Face's own format, in that folder of the export
        backbone = instantiate(model_cfg.backbone, name_or_path=str(export_dir / model_cfg.backbone.name_or_path))
    else:
        backbone = instantiate(model_cfg.backbone)
        state = torch.load(export_dir / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        backbone.load_state_dict(state)
    tokenizer = AutoTokenizer.from_pretrained(str(export_dir), use_fast=True)
    return backbone, model_cfg, tokenizer

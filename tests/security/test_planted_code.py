"""Issue 41, defect 1: a model folder (a backbone export, a task model, an `mlflow:` artifact, a
run's stored config) must never make a worker run code ptmlab does not ship. Each planted file
names code that would leave a mark on disk if it ran; every test checks that the mark is absent,
not only that loading failed."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from ptmlab.contracts.errors import UntrustedCodeError


class _WritesWhenUnpickled:
    """A pickle whose loading copies a file: what `torch.load(..., weights_only=False)` would run."""

    def __init__(self, src: Path, dst: Path):
        self.src, self.dst = str(src), str(dst)

    def __reduce__(self):
        return shutil.copyfile, (self.src, self.dst)


@pytest.fixture()
def scene(tmp_path):
    """A secret the planted code would copy, the place its copy would land, and a planted pickle."""
    secret = tmp_path / "worker.env"
    secret.write_text("POSTGRES_PASSWORD=hunter2\n")
    mark = tmp_path / "pwned"
    pkl = tmp_path / "planted.pkl"
    pkl.write_bytes(pickle.dumps(_WritesWhenUnpickled(secret, mark)))
    return secret, mark, pkl


def planted_nodes(secret: Path, mark: Path, pkl: Path) -> dict[str, dict]:
    encoder = "lightning_modules.models.transformer.TransformerEncoder"
    return {
        "shutil.copyfile": {"_target_": "shutil.copyfile", "src": str(secret), "dst": str(mark)},
        "builtins.open": {"_target_": "builtins.open", "file": str(mark), "mode": "w"},
        "torch.load of a pickle": {"_target_": "torch.load", "f": str(pkl), "weights_only": False},
        # Hydra resolves a dotted path through module attributes: a prefix check alone lets this through.
        "a shipped module's import": {
            "_target_": "lightning_modules.models.transformer.torch.load",
            "f": str(pkl),
            "weights_only": False,
        },
        "nested in a shipped class": {
            "_target_": encoder,
            "vocab_size": 10,
            "hidden_size": {"_target_": "shutil.copyfile", "src": str(secret), "dst": str(mark)},
        },
        "positional args": {
            "_target_": encoder,
            "_args_": [{"_target_": "shutil.copyfile", "src": str(secret), "dst": str(mark)}],
        },
    }


def plant_export(folder: Path, backbone_node: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "ptmlab_model.yaml").write_text(
        yaml.safe_dump({"name": "evil", "family": "encoder", "backbone": backbone_node})
    )
    return folder


CASES = [
    "shutil.copyfile",
    "builtins.open",
    "torch.load of a pickle",
    "a shipped module's import",
    "nested in a shipped class",
    "positional args",
]


@pytest.mark.parametrize("case", CASES)
def test_a_planted_export_is_refused_before_anything_runs(case, scene, tmp_path):
    from lightning_modules.artifacts.backbone_reference import resolve_backbone

    secret, mark, pkl = scene
    folder = plant_export(tmp_path / "home" / "evil_backbone", planted_nodes(secret, mark, pkl)[case])
    cfg = OmegaConf.create({"backbone": str(folder)})
    with pytest.raises(UntrustedCodeError, match=r"ptmlab_model\.yaml"):
        resolve_backbone(cfg, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert not mark.exists(), f"{case}: the planted code ran"


def test_a_planted_backbone_record_is_refused(scene, tmp_path):
    """ptmlab_backbone.json's configs become the run's own groups (record_backbone): a corpus or
    objective node there is instantiated later, so it is checked when read."""
    from lightning_modules.artifacts.backbone_export import read_backbone_manifest

    secret, mark, pkl = scene
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "ptmlab_backbone.json").write_text(
        json.dumps(
            {
                "configs": {
                    "data": {
                        "name": "x",
                        "corpus": {"_target_": "shutil.copyfile", "src": str(secret), "dst": str(mark)},
                    }
                }
            }
        )
    )
    with pytest.raises(UntrustedCodeError, match=r"configs\.data\.corpus"):
        read_backbone_manifest(folder)
    (folder / "ptmlab_backbone.json").write_text(
        json.dumps({"configs": {"objective": {"name": "mlm", "path": "${oc.env:POSTGRES_PASSWORD}"}}})
    )
    with pytest.raises(UntrustedCodeError, match="resolver"):
        read_backbone_manifest(folder)
    assert not mark.exists()


def _task_model_manifest(backbone: dict, adaptation: dict, reader: dict | None = None) -> dict:
    manifest = {
        "format_version": 1,
        "kind": "task_model",
        "model": {"name": "evil", "family": "encoder", "backbone": backbone},
        "adaptation": adaptation,
        "pooling": "cls",
        "scalar_mix": False,
        "head_dropout": 0.1,
        "heads": {"sst2": 2},
        "tasks": {"sst2": {"name": "sst2", "num_labels": 2}},
        "weights": {"file": "model.safetensors"},
        "tokenizer_files": [],
    }
    if reader is not None:
        manifest["task_configs"] = {"sst2": {"name": "sst2", "data": reader}}
    return manifest


def test_a_planted_task_model_is_refused(scene, tmp_path):
    from lightning_modules.artifacts.saved_task_model import load_task_model

    secret, mark, pkl = scene
    planted = planted_nodes(secret, mark, pkl)
    encoder = {"_target_": "lightning_modules.models.transformer.TransformerEncoder", "vocab_size": 10}
    full = {"_target_": "lightning_modules.adaptation.full.FullFineTuning"}
    manifests = {
        "model.backbone": _task_model_manifest(planted["a shipped module's import"], full),
        "adaptation": _task_model_manifest(encoder, planted["shutil.copyfile"]),
        "task_configs.sst2.data": _task_model_manifest(encoder, full, reader=planted["builtins.open"]),
    }
    for where, manifest in manifests.items():
        folder = tmp_path / where / "export" / "task_model"
        folder.mkdir(parents=True)
        (folder / "task_model.json").write_text(json.dumps(manifest))
        with pytest.raises(UntrustedCodeError, match=where.replace(".", r"\.")):
            load_task_model(str(folder.parent.parent))
        assert not mark.exists(), f"{where}: the planted code ran"


def test_a_planted_export_through_mlflow_is_refused(scene, tmp_path):
    """`backbone=mlflow:<run>`: a run created through MLflow's unauthenticated REST API whose
    `export` artifact holds the planted model file."""
    from mlflow.tracking import MlflowClient

    from lightning_modules.artifacts.backbone_reference import resolve_backbone

    secret, mark, pkl = scene
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("planted", artifact_location=str(tmp_path / "attacker_artifacts"))
    run = client.create_run(experiment)
    export = plant_export(tmp_path / "staging" / "export", planted_nodes(secret, mark, pkl)["shutil.copyfile"])
    client.log_artifacts(run.info.run_id, str(export), artifact_path="export")
    client.set_terminated(run.info.run_id)
    with pytest.raises(UntrustedCodeError, match="shutil.copyfile"):
        resolve_backbone(OmegaConf.create({"backbone": f"mlflow:{run.info.run_id}"}), tracking_uri=uri)
    assert not mark.exists()


def test_every_shipped_backbone_and_adaptation_passes():
    """The check refuses nothing conf/ itself builds: every model option's backbone node and every
    adaptation option, as their files hold them."""
    from ptmlab.config_groups import CONF_DIR
    from ptmlab.methods.shipped import check_shipped_code

    checked = 0
    for group, slot in (("model", "backbone"), ("adaptation", "adaptation")):
        for path in sorted((CONF_DIR / group).rglob("*.yaml")):
            node = yaml.safe_load(path.read_text()) or {}
            node = node.get("backbone") if slot == "backbone" else node
            if isinstance(node, dict) and "_target_" in node:
                check_shipped_code({k: v for k, v in node.items() if k != "defaults"}, str(path), slot=slot)
                checked += 1
    assert checked >= 20

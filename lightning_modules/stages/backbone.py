"""Where a finetune/probe/compress stage gets its backbone and tokenizer from (`backbone=`):

    null (default)         the `model` config: model=hf loads the Hugging Face checkpoint; any
                           other architecture is randomly initialised with a tokenizer trained on
                           the `data` corpus (as pre-training would)
    random                 the same architecture as `model`, randomly initialised: the control
    job:<id>               a platform job; the worker resolves it at claim time to the parent's
                           run folder (a path, below)
    mlflow:<run_id>        the `export` artifact of an MLflow run (downloaded)
    <folder>               a run folder (with export/), an export folder, or a Hugging Face folder
    <name>                 a Hugging Face Hub name (needs the network or a local cache)

`load_task_model` (task_model.py) resolves the same references (but a Hub name) to a task model.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from lightning_modules.stages.export import MODEL_FILE, load_exported_backbone
from ptmlab.contracts import BackboneError


@dataclass
class ResolvedBackbone:
    backbone: object
    tokenizer: object
    model_name: str  # for results: the architecture or checkpoint it came from
    objective: str  # the pre-training objective behind it, or "none" (random) / "hf"
    source: str
    # The `model` node that rebuilds this architecture (backbone `_target_` + args, vocab_size
    # included); a Hugging Face backbone carries its own config instead: {name, family: hf}.
    model_cfg: dict | None = None
    # The ptmlab export folder it was read from (None otherwise): prompt-based modes read the
    # pre-training objective's LM head there (adaptation/lm_head.py).
    export_dir: Path | None = None


def _from_hf(name_or_path: str, pretrained: bool, label: str | None = None) -> ResolvedBackbone:
    from lightning_modules.data.tokenizer import load_pretrained_tokenizer
    from lightning_modules.models.hf import HFBackbone, resolve_name_or_path

    backbone = HFBackbone(name_or_path, pretrained=pretrained)
    tokenizer = load_pretrained_tokenizer(resolve_name_or_path(name_or_path))
    name = label or Path(str(name_or_path)).name
    return ResolvedBackbone(backbone, tokenizer, name, "hf" if pretrained else "none", str(name_or_path),
                            {"name": name, "family": "hf"})


def _from_export(folder: Path, source: str) -> ResolvedBackbone:
    backbone, model_cfg, tokenizer = load_exported_backbone(folder)
    objective = "unknown"
    summary = folder.parent / "summary.json"
    if summary.exists():
        import json

        objective = json.loads(summary.read_text()).get("objective", "unknown")
    return ResolvedBackbone(backbone, tokenizer, str(model_cfg.get("name", "?")), objective, source,
                            OmegaConf.to_container(model_cfg, resolve=True), export_dir=folder)


def _from_folder(folder: Path, source: str) -> ResolvedBackbone:
    if (folder / "export" / MODEL_FILE).exists():
        return _from_export(folder / "export", source)
    if (folder / MODEL_FILE).exists():
        return _from_export(folder, source)
    if (folder / "config.json").exists():
        return _from_hf(str(folder), pretrained=True)
    raise BackboneError(f"backbone={source}: {folder} holds no ptmlab export ({MODEL_FILE}) and no Hugging Face config.json")


def refuse_job_ref(ref: str, key: str) -> None:
    """`job:<id>` only means something to the platform: its worker rewrites `key=job:<id>` into
    the parent's run folder when it claims the job (ptmlab/queue/claim.py)."""
    if ref.startswith("job:"):
        raise BackboneError(f"{key}={ref} is resolved by a platform worker; run it through the queue "
                            f"(ptmlab submit) or pass the parent's run folder")


def download_run_artifact(run_id: str, artifact: str, tracking_uri: str, key: str,
                          exclude: tuple[str, ...] = ()) -> Path:
    """The folder `artifact` of an MLflow run, downloaded to a temporary folder (its entries
    named in `exclude` left out)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    target = Path(tempfile.mkdtemp(prefix="ptmlab-artifact-")) / Path(artifact).name
    target.mkdir()
    try:
        entries = [e.path for e in client.list_artifacts(run_id, artifact) if e.path not in exclude]
        if not entries:
            raise FileNotFoundError(artifact)
        for entry in entries:  # each lands in target/<its base name>
            client.download_artifacts(run_id, entry, str(target))
    except Exception as exc:  # noqa: BLE001 - mlflow raises several types for a missing run/artifact
        raise BackboneError(f"{key}=mlflow:{run_id}: no '{artifact}' artifact in that run ({type(exc).__name__})") from None
    return target


def _from_mlflow(run_id: str, tracking_uri: str) -> ResolvedBackbone:
    from lightning_modules.stages.task_model import TASK_MODEL_ARTIFACT

    local = download_run_artifact(run_id, "export", tracking_uri, "backbone", exclude=(TASK_MODEL_ARTIFACT,))
    return _from_export(local, f"mlflow:{run_id}")


def _fresh_from_model_cfg(cfg: DictConfig) -> ResolvedBackbone:
    from lightning_modules.data.tokenizer import build_tokenizer

    if OmegaConf.select(cfg, "model.name_or_path") is not None:
        # A model config that names a checkpoint brings its own weights and tokenizer (`backbone=random`:
        # its architecture only); the others train a tokenizer on the corpus.
        return _from_hf(str(cfg.model.name_or_path), pretrained=OmegaConf.select(cfg, "backbone") != "random",
                        label=str(cfg.model.name))
    corpus = instantiate(cfg.data.corpus)
    tokenizer = build_tokenizer(cfg.tokenizer, corpus, Path(cfg.paths.cache_dir))
    backbone = instantiate(cfg.model.backbone, vocab_size=len(tokenizer))
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    model_cfg["backbone"]["vocab_size"] = len(tokenizer)
    return ResolvedBackbone(backbone, tokenizer, str(cfg.model.name), "none", "random", model_cfg)


def resolve_backbone(cfg: DictConfig, tracking_uri: str) -> ResolvedBackbone:
    ref = OmegaConf.select(cfg, "backbone", default=None)
    if ref is None or str(ref) == "random":
        return _fresh_from_model_cfg(cfg)
    ref = str(ref)
    refuse_job_ref(ref, "backbone")
    if ref.startswith("mlflow:"):
        return _from_mlflow(ref[len("mlflow:"):], tracking_uri)
    path = Path(ref).expanduser()
    if path.is_dir():
        return _from_folder(path, ref)
    if ref.startswith(("/", ".", "~")):
        raise BackboneError(f"backbone={ref}: folder not found")
    return _from_hf(ref, pretrained=True)

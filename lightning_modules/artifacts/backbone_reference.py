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

Every resolved backbone carries a record of what it is (`ResolvedBackbone.record`: model, family,
objective, tokenizer, corpus, size, the run that made it), read from a ptmlab export's manifest
(export.py `ptmlab_backbone.json`). `record_backbone(cfg, resolved)` writes it into the run's config
before the run opens, so config.yaml, the MLflow params, the job and compare pages show the
backbone that ran, not the model/objective/tokenizer defaults a referenced backbone replaced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from lightning_modules.artifacts.backbone_export import MODEL_FILE, load_exported_backbone, read_backbone_manifest
from lightning_modules.artifacts.references import download_run_artifact, refuse_job_ref
from lightning_modules.artifacts.task_model_manifest import TASK_MODEL_ARTIFACT
from lightning_modules.data.corpus_tokenizer import CorpusTokenizer, load_corpus_tokenizer
from lightning_modules.data.tokenizer import load_pretrained_tokenizer
from lightning_modules.models.hf import HFBackbone, resolve_name_or_path
from lightning_modules.models.hf_generator import HFGenerator
from ptmlab.contracts import BackboneError
from ptmlab.methods.shipped import check_shipped_code

# What a backbone's record holds (summary.json `backbone`, the config's `resolved_backbone`).
RECORD_KEYS = (
    "reference",
    "model",
    "family",
    "objective",
    "tokenizer",
    "data",
    "params",
    "vocab_size",
    "source_stage",
    "source_job",
    "source_run",
    "source_run_dir",
)


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
    # What it is (RECORD_KEYS; None where unknown) and the config nodes it was made with
    # ({objective, tokenizer, data}: those that are known), for `record_backbone`.
    record: dict = field(default_factory=dict)
    configs: dict = field(default_factory=dict)


def _count_parameters(backbone) -> int | None:
    try:
        return sum(p.numel() for p in backbone.parameters())
    except AttributeError:
        return None


def with_record(resolved: ResolvedBackbone, **known) -> ResolvedBackbone:
    """Fill `resolved.record`: what the loaded backbone itself tells, then what `known` says
    (RECORD_KEYS; None values say nothing)."""
    record = dict.fromkeys(RECORD_KEYS)
    record.update(
        reference=resolved.source,
        model=resolved.model_name,
        objective=resolved.objective,
        family=(resolved.model_cfg or {}).get("family"),
        params=_count_parameters(resolved.backbone),
        vocab_size=len(resolved.tokenizer) if resolved.tokenizer is not None else None,
    )
    record.update({k: v for k, v in known.items() if v is not None})
    resolved.record = record
    return resolved


def _from_hf(
    name_or_path: str, pretrained: bool, label: str | None = None, with_lm_head: bool = False
) -> ResolvedBackbone:
    # A generation task trains the checkpoint's own LM head (models/hf_generator.py).
    backbone = (HFGenerator if with_lm_head else HFBackbone)(name_or_path, pretrained=pretrained)
    tokenizer = load_pretrained_tokenizer(resolve_name_or_path(name_or_path))
    name = label or Path(str(name_or_path)).name
    resolved = ResolvedBackbone(
        backbone, tokenizer, name, "hf" if pretrained else "none", str(name_or_path), {"name": name, "family": "hf"}
    )
    # A checkpoint brings its own tokenizer; what it was pre-trained on is the checkpoint's own business.
    tokenizer_name = type(tokenizer).__name__
    resolved.configs = {
        "model": {"name": name, "family": "hf", "name_or_path": str(name_or_path)},
        "tokenizer": {"name": tokenizer_name, "name_or_path": str(name_or_path)},
    }
    return with_record(resolved, family="hf", tokenizer=tokenizer_name, source_stage="huggingface")


def _from_export(folder: Path, source: str) -> ResolvedBackbone:
    backbone, model_cfg, tokenizer = load_exported_backbone(folder)
    manifest = read_backbone_manifest(folder) or _manifest_of_older_export(folder)
    resolved = ResolvedBackbone(
        backbone,
        tokenizer,
        str(model_cfg.get("name", "?")),
        str(manifest.get("objective") or "unknown"),
        source,
        OmegaConf.to_container(model_cfg, resolve=True),
        export_dir=folder,
    )
    resolved.configs = dict(manifest.get("configs") or {})
    return with_record(resolved, **{k: manifest.get(k) for k in RECORD_KEYS if k not in ("reference", "model")})


def _manifest_of_older_export(folder: Path) -> dict:
    """An export from before ptmlab_backbone.json: what its run folder (export/'s parent) still
    says, from its summary.json and config.yaml (an `mlflow:` download has neither: unknown)."""
    import json

    manifest: dict = {}
    summary, config = folder.parent / "summary.json", folder.parent / "config.yaml"
    if summary.is_file():
        data = json.loads(summary.read_text())
        manifest.update(
            objective=data.get("objective"),
            data=data.get("data"),
            source_stage=data.get("stage"),
            source_run=data.get("mlflow_run_id"),
            source_run_dir=str(folder.parent),
        )
    if config.is_file():
        cfg = OmegaConf.load(config)
        groups = ("objective", "tokenizer", "data") if manifest.get("source_stage") == "pretrain" else ()
        manifest["configs"] = {g: OmegaConf.to_container(cfg[g]) for g in groups if cfg.get(g) is not None}
        manifest["tokenizer"] = OmegaConf.select(cfg, "tokenizer.name") if groups else None
        manifest["source_job"] = OmegaConf.select(cfg, "tracking.job_id", default=None)
        check_shipped_code(manifest["configs"], str(config), path="configs")
    return manifest


def _from_folder(folder: Path, source: str, with_lm_head: bool = False) -> ResolvedBackbone:
    if (folder / "export" / MODEL_FILE).exists():
        return _from_export(folder / "export", source)
    if (folder / MODEL_FILE).exists():
        return _from_export(folder, source)
    if (folder / "config.json").exists():
        return _from_hf(str(folder), pretrained=True, with_lm_head=with_lm_head)
    raise BackboneError(
        f"backbone={source}: {folder} holds no ptmlab export ({MODEL_FILE}) and no Hugging Face config.json"
    )


def _from_mlflow(run_id: str, tracking_uri: str) -> ResolvedBackbone:
    local = download_run_artifact(run_id, "export", tracking_uri, "backbone", exclude=(TASK_MODEL_ARTIFACT,))
    return _from_export(local, f"mlflow:{run_id}")


def _fresh_from_model_cfg(cfg: DictConfig, corpus_tokenizer: CorpusTokenizer | None = None) -> ResolvedBackbone:

    if OmegaConf.select(cfg, "model.name_or_path") is not None:
        # A model config that names a checkpoint brings its own weights and tokenizer (`backbone=random`:
        # its architecture only); the others train a tokenizer on the corpus.
        return _from_hf(
            str(cfg.model.name_or_path),
            pretrained=OmegaConf.select(cfg, "backbone") != "random",
            with_lm_head=OmegaConf.select(cfg, "task.kind") == "generation",
            label=str(cfg.model.name),
        )
    read = corpus_tokenizer or load_corpus_tokenizer(cfg.data, cfg.tokenizer, cfg.paths.cache_dir)
    tokenizer = read.tokenizer
    backbone = instantiate(cfg.model.backbone, vocab_size=len(tokenizer))
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    model_cfg["backbone"]["vocab_size"] = len(tokenizer)
    resolved = ResolvedBackbone(backbone, tokenizer, str(cfg.model.name), "none", "random", model_cfg)
    # Built here: the model, tokenizer and corpus groups ran (the tokenizer trained on the corpus);
    # no objective did.
    return with_record(resolved, tokenizer=str(cfg.tokenizer.name), data=str(cfg.data.name), source_stage="none")


NO_PRETRAINING = {"name": "none"}  # the objective node of a backbone no objective trained


def record_backbone(cfg: DictConfig, resolved: ResolvedBackbone) -> None:
    """Make `cfg` say which backbone runs, before the stage's run opens (and writes config.yaml and
    the MLflow params from it): the `model` group becomes the backbone's model node, `objective`,
    `tokenizer` and `data` the ones it was trained with (a name alone where only that is known; a
    backbone built here keeps the tokenizer and corpus it was built from), and `resolved_backbone`
    holds the whole record (size, the run that made it). The defaults a referenced backbone
    replaced are never shown as if they ran."""
    record = resolved.record or with_record(resolved).record
    ref = OmegaConf.select(cfg, "backbone", default=None)
    # A Hugging Face checkpoint named by the `model` group: that node is what ran, as it is.
    hf_model_group = (ref is None or str(ref) == "random") and OmegaConf.select(cfg, "model.name_or_path") is not None
    with open_dict(cfg):
        model_node = resolved.configs.get("model") or resolved.model_cfg
        if model_node and not hf_model_group:  # the actual vocabulary size, or the referenced model
            cfg.model = OmegaConf.create(model_node)
        if record.get("family") is not None and OmegaConf.select(cfg, "model.family") is None:
            cfg.model.family = record["family"]
        objective = resolved.configs.get("objective")
        cfg.objective = (
            objective
            if objective
            else (NO_PRETRAINING if resolved.objective == "none" else {"name": str(resolved.objective)})
        )
        if record.get("source_stage") != "none":  # not built here: its own tokenizer and corpus
            for group in ("tokenizer", "data"):
                node = resolved.configs.get(group)
                cfg[group] = node if node else {"name": str(record.get(group) or "unknown")}
        cfg.resolved_backbone = {k: record.get(k) for k in RECORD_KEYS}


def backbone_summary(resolved: ResolvedBackbone) -> dict:
    """The summary.json fields that say what the backbone was."""
    record = resolved.record or with_record(resolved).record
    return {"family": record.get("family"), "tokenizer": record.get("tokenizer"), "backbone": dict(record)}


def resolve_backbone(
    cfg: DictConfig, tracking_uri: str, corpus_tokenizer: CorpusTokenizer | None = None
) -> ResolvedBackbone:
    """The backbone `backbone` names; built from `model` when it names none (with the corpus and
    tokenizer the stage's preflight read, `corpus_tokenizer`, else read here)."""
    ref = OmegaConf.select(cfg, "backbone", default=None)
    if ref is None or str(ref) == "random":
        return _fresh_from_model_cfg(cfg, corpus_tokenizer)
    ref = str(ref)
    refuse_job_ref(ref, "backbone")
    if ref.startswith("mlflow:"):
        return _from_mlflow(ref[len("mlflow:") :], tracking_uri)
    path = Path(ref).expanduser()
    if path.is_dir():
        return _from_folder(path, ref, with_lm_head=OmegaConf.select(cfg, "task.kind") == "generation")
    if ref.startswith(("/", ".", "~")):
        raise BackboneError(f"backbone={ref}: folder not found")
    return _from_hf(ref, pretrained=True, with_lm_head=OmegaConf.select(cfg, "task.kind") == "generation")

"""A fine-tuned model as an artifact you can load: the *task model* export.

Every finetune and multitask run saves its task model (backbone weights, adaptation modules,
head(s), tokenizer, task spec(s), model config) to `<run dir>/export/task_model/`, logged to
MLflow as the artifact `export/task_model`. `load_task_model(ref)` loads it back from

    <folder>           a run folder (…/export/task_model), an export folder (…/task_model) or
                       the task_model folder itself
    mlflow:<run_id>    the run's `export/task_model` artifact (downloaded)
    job:<id>           a platform job: its worker rewrites `key=job:<id>` into the parent's run
                       folder when it claims the child (ptmlab/queue/claim.py)

    loaded = load_task_model(run_dir)            # LoadedTaskModel, eval mode, CPU
    batch = loaded.encode([("a gripping film",)])   # tokenised as in training
    loaded(batch)                                # {"sst2": B×2}: logits of every head
    loaded.task, loaded.tasks, loaded.tokenizer  # first task's TaskSpec, all of them
    evaluate(loaded, task, "dev")                # heads/evaluation.py

Layout (format_version 1; safetensors and JSON only, nothing pickled):

    task_model.json        the manifest, below
    model.safetensors      the whole model's state dict: backbone.* (adapters inserted),
                           scalar_mix.* (feature-based), head.* (one task) or heads.<task>.*
    tokenizer files        PreTrainedTokenizerFast.save_pretrained (tokenizer.json, ...)
    backbone_config/       Hugging Face backbones only: config.json, the architecture (its
                           weights are in model.safetensors)

Manifest (task_model.json):

    format_version   1, or 2 for a compressed model (it has `compression`); a reader refuses a
                     newer version
    kind             task_model (one head: heads/task_model.py TaskModel) |
                     multitask_model (a head per task: heads/multitask_model.py MultiTaskModel)
    model            the `model` node that rebuilds the backbone: {name, family, backbone:
                     {_target_: lightning_modules.models.…, its arguments, vocab_size}}
    adaptation       the adaptation node ({name, _target_: lightning_modules.adaptation.…, args});
                     its `insert_modules` rebuilds what it inserted (adapters)
    pooling, scalar_mix, head_dropout    as the model was built (heads/pooling.py)
    heads            task name -> head size (1 for regression)
    tasks            task name -> TaskSpec fields (labels in class-index order, metrics, ...)
    weights          {file: model.safetensors, sha256}
    tokenizer_files  the files the tokenizer wrote
    versions         torch, transformers, safetensors, ptmlab that wrote it
    task_configs     task name -> the `task` config node it was trained with (unresolved, so
                     `${paths.data_dir}` follows the machine that loads it): a stage that takes a
                     task model (compress) reads its task from here when `task=` is not given
                     (`source_task_node`); older manifests lack it (then the run's config.yaml)
    compression      (format 2) the structural edits compression made, re-applied in order before
                     the weights are read: pruned heads, low-rank factors, a dtype cast, int8
                     quantization (lightning_modules/artifacts/structural_edits.py); a quantized
                     model's int8 weights are stored as plain tensors (artifacts/quantization.py)

Loading rebuilds the architecture from the manifest (only `_target_`s under
lightning_modules.models / lightning_modules.adaptation are instantiated), checks every tensor's
name and shape against it, then reads the weights. A newer format_version, a missing file or key,
or a tensor that does not fit fails with one line (BackboneError) naming the file and key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch

from lightning_modules.adaptation.from_config import build_adaptation
from lightning_modules.artifacts.digests import sha256_file
from lightning_modules.artifacts.quantization import get_backend, load_quantized_state, quantized_state
from lightning_modules.artifacts.structural_edits import apply_structure
from lightning_modules.artifacts.task_model_manifest import (
    HF_CONFIG_DIR,
    MANIFEST_FILE,
    MULTI,
    SINGLE,
    WEIGHTS_FILE,
    read_manifest,
    recorded_task_node,
    task_model_folder,
)
from lightning_modules.heads.generation_model_for import generation_model_for
from lightning_modules.heads.multiple_choice_model import MultipleChoiceModel
from lightning_modules.heads.multitask_model import MultiTaskModel
from lightning_modules.heads.pooling import PooledEncoder
from lightning_modules.heads.task_model import TaskModel
from lightning_modules.tasks.spec import TaskSpec
from ptmlab.contracts import BackboneError, ConfigError

HF_BACKBONE = "lightning_modules.models.hf.HFBackbone"
HF_BACKBONES = (HF_BACKBONE, "lightning_modules.models.hf_generator.HFGenerator")  # weights in the checkpoint's format


@dataclass
class LoadedTaskModel:
    model: PooledEncoder  # TaskModel or MultiTaskModel, in eval mode
    tokenizer: object
    tasks: dict[str, TaskSpec]
    manifest: dict
    folder: Path

    @property
    def task(self) -> TaskSpec:
        """The (first) task's spec."""
        return next(iter(self.tasks.values()))

    def encode(self, texts, task: str | None = None) -> dict[str, torch.Tensor]:
        """A batch from 1- or 2-tuples of strings, encoded as in training (tasks/encoding.py)."""
        spec = self.tasks[task] if task is not None else self.task
        encoder = self.model.input_encoder(self.tokenizer, spec.max_length, doc_stride=spec.doc_stride)
        items = encoder.encode(list(texts))
        for i, item in enumerate(items):
            item.setdefault("example_index", i)  # a span model's windows already name their pair
        device = next(self.model.parameters()).device
        return {k: v.to(device) for k, v in encoder.collate(items).items()}

    @torch.no_grad()
    def __call__(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return self.model.logits(batch)


def _versions() -> dict[str, str]:
    out = {}
    for name in ("torch", "transformers", "safetensors", "ptmlab"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


# -- saving ----------------------------------------------------------------------------------
def save_task_model(
    model: PooledEncoder,
    out_dir: Path,
    *,
    model_cfg: dict,
    tokenizer,
    tasks: dict[str, TaskSpec],
    adaptation: dict,
    compression: list[dict] | None = None,
    task_configs: dict[str, dict] | None = None,
    defence: dict | None = None,
) -> Path:
    """Write the layout above to `out_dir` (the manifest last: a folder without one is incomplete).
    `compression`: the structural edits the model went through (artifacts/structural_edits.py);
    `task_configs`: each task's config node, so later stages need no `task=`; `defence`: the
    adversarial training it was fine-tuned with (adaptation/adversarial.py `settings()`), read by stage=attack."""
    from safetensors.torch import save_file, save_model

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST_FILE).unlink(missing_ok=True)
    backbone = model.backbone
    if backbone.hf_native:
        backbone.config.save_pretrained(str(out_dir / HF_CONFIG_DIR))
        model_cfg = {
            "name": str(model_cfg.get("name", "hf")),
            "family": "hf",
            "backbone": {
                "_target_": f"{type(backbone).__module__}.{type(backbone).__qualname__}",
                "name_or_path": HF_CONFIG_DIR,
                "pretrained": False,
            },
        }
    heads = dict(model.heads) if isinstance(model, MultiTaskModel) else {model.task_name: model.head}
    if None in heads or set(heads) != set(tasks):
        raise BackboneError(f"save_task_model: heads {sorted(map(str, heads))} do not match tasks {sorted(tasks)}")
    if any(op.get("op") == "quantize" for op in compression or ()):
        save_file(quantized_state(model), str(out_dir / WEIGHTS_FILE))
    else:
        save_model(model, str(out_dir / WEIGHTS_FILE))  # shared tensors (tied weights) stored once
    written = tokenizer.save_pretrained(str(out_dir))
    manifest = {
        "format_version": 2 if compression else 1,
        "kind": MULTI if isinstance(model, MultiTaskModel) else SINGLE,
        "model": model_cfg,
        "adaptation": adaptation,
        "pooling": model.pooling,
        "scalar_mix": model.scalar_mix is not None,
        "head_dropout": float(next(iter(heads.values()))[0].p),
        "heads": model.head_sizes,
        "tasks": {name: spec.to_dict() for name, spec in tasks.items()},
        "weights": {"file": WEIGHTS_FILE, "sha256": sha256_file(out_dir / WEIGHTS_FILE)},
        "tokenizer_files": sorted({Path(p).name for p in written if Path(p).is_file()}),
        "versions": _versions(),
    }
    if task_configs:
        manifest["task_configs"] = {name: node for name, node in task_configs.items() if name in tasks}
    if compression:
        manifest["compression"] = list(compression)
    if defence:
        manifest["defence"] = dict(defence)
    tmp = out_dir / (MANIFEST_FILE + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2))
    tmp.replace(out_dir / MANIFEST_FILE)
    return out_dir


def task_configs_of(cfg, names) -> dict[str, dict]:
    """The run's task nodes (`task`, or stage=multitask's `stage.tasks`) by task name, unresolved."""
    from omegaconf import DictConfig, OmegaConf

    from ptmlab.contracts.task_checks import multitask_task_nodes

    if isinstance(cfg.get("task"), DictConfig):
        nodes = {str(cfg.task.name): cfg.task}
    elif "tasks" in cfg.get("stage", {}):
        nodes = multitask_task_nodes(cfg)
    else:
        nodes = {}
    return {name: OmegaConf.to_container(node, resolve=False) for name, node in nodes.items() if name in names}


# -- loading ---------------------------------------------------------------------------------
def _required_file(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.exists():
        raise BackboneError(f"{path}: missing (listed by {folder / MANIFEST_FILE})")
    return path


def _build_model(manifest: dict, folder: Path) -> PooledEncoder:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    node = OmegaConf.create(manifest["model"]["backbone"])
    if node._target_ in HF_BACKBONES:  # the architecture from its config.json; weights come below
        config_dir = _required_file(folder, f"{node.name_or_path}/config.json").parent
        backbone = instantiate(node, name_or_path=str(config_dir), pretrained=False)
    else:
        backbone = instantiate(node)
    heads = {str(name): int(size) for name, size in manifest["heads"].items()}
    common = {
        "pooling": str(manifest["pooling"]),
        "head_dropout": float(manifest["head_dropout"]),
        "scalar_mix": bool(manifest["scalar_mix"]),
    }
    specs = list(manifest["tasks"].values())
    if manifest["kind"] == SINGLE and specs[0].get("kind") == "generation":  # heads/generation_model.py
        ((name, _),) = heads.items()
        model = generation_model_for(
            backbone,
            task_name=name,
            head_dropout=common["head_dropout"],
            max_target_length=int(specs[0].get("max_target_length", 128)),
            source_prefix=specs[0].get("source_prefix"),
        )
    elif manifest["kind"] == SINGLE and specs[0].get("kind") == "multiple_choice":  # heads/multiple_choice_model.py
        ((name, _),) = heads.items()
        model = MultipleChoiceModel(
            backbone, scoring=str(specs[0].get("choice_scoring", "head")), task_name=name, **common
        )
    elif manifest["kind"] == MULTI:
        model = MultiTaskModel(backbone, heads, **common)
    else:
        ((name, size),) = heads.items()
        model = TaskModel(backbone, size, task_name=name, **common)
    build_adaptation(OmegaConf.create(manifest["adaptation"])).insert_modules(model)
    return model


def _load_weights(model: PooledEncoder, manifest: dict, folder: Path) -> None:
    from safetensors import safe_open
    from safetensors.torch import load_model

    path = _required_file(folder, manifest["weights"].get("file", WEIGHTS_FILE))
    expected_sha = manifest["weights"].get("sha256")
    if expected_sha and sha256_file(path) != expected_sha:
        raise BackboneError(f"{path}: sha256 differs from weights.sha256 in {MANIFEST_FILE} (changed or corrupt)")
    with safe_open(str(path), framework="pt") as f:
        shapes = {key: list(f.get_slice(key).get_shape()) for key in f.keys()}
    pooler = getattr(getattr(model.backbone, "model", None), "pooler", None)
    if pooler is not None and not any(k.startswith("backbone.model.pooler.") for k in shapes):
        model.backbone.model.pooler = None  # Hugging Face BERT-family backbones load without theirs
    state = model.state_dict()
    for key, shape in shapes.items():
        if key in state and list(state[key].shape) != shape:
            head = key.split(".")[1] if key.startswith("heads.") else next(iter(manifest["heads"]))
            hint = f" (heads.{head}={manifest['heads'][head]})" if key.startswith(("head.", "heads.")) else ""
            raise BackboneError(
                f"{path}: {key} has shape {shape} but the model {MANIFEST_FILE} describes "
                f"needs {list(state[key].shape)}{hint}"
            )
    missing, unexpected = load_model(model, str(path), strict=False)
    if missing:
        raise BackboneError(
            f"{path}: no tensor {missing[0]} ({len(missing)} missing), which the model {MANIFEST_FILE} describes needs"
        )
    if unexpected:
        raise BackboneError(
            f"{path}: tensor {unexpected[0]} ({len(unexpected)} unexpected) is not in the "
            f"model {MANIFEST_FILE} describes"
        )


def _load_quantized_weights(model: PooledEncoder, manifest: dict, folder: Path, quantize: dict) -> None:
    """Quantize the built model with the recorded settings, then read the saved int8 weights."""
    from safetensors.torch import load_file

    path = _required_file(folder, manifest["weights"].get("file", WEIGHTS_FILE))
    expected_sha = manifest["weights"].get("sha256")
    if expected_sha and sha256_file(path) != expected_sha:
        raise BackboneError(f"{path}: sha256 differs from weights.sha256 in {MANIFEST_FILE} (changed or corrupt)")
    tensors = load_file(str(path))
    pooler = getattr(getattr(model.backbone, "model", None), "pooler", None)
    if pooler is not None and not any(k.startswith("backbone.model.pooler.") for k in tensors):
        model.backbone.model.pooler = None
    model.eval()
    get_backend(str(quantize.get("backend", "torch.ao"))).quantize_dynamic(
        model, embeddings=bool(quantize.get("embeddings", True))
    )
    load_quantized_state(model, tensors, str(path))


def load_task_model(ref, *, tracking_uri: str | None = None, device: str | torch.device = "cpu") -> LoadedTaskModel:
    """A saved task model, ready: eval mode, on `device` (see the module docstring)."""
    from transformers import AutoTokenizer

    folder = task_model_folder(str(ref), tracking_uri)
    manifest = read_manifest(folder)
    for name in manifest["tokenizer_files"]:
        _required_file(folder, name)
    try:
        tasks = {str(name): TaskSpec.from_dict(spec) for name, spec in manifest["tasks"].items()}
    except KeyError as exc:
        raise BackboneError(f"{folder / MANIFEST_FILE}: tasks entry without key '{exc.args[0]}'") from None
    model = _build_model(manifest, folder)
    quantize = None
    if manifest.get("compression"):
        quantize = apply_structure(model, list(manifest["compression"]))
    if quantize is not None:
        _load_quantized_weights(model, manifest, folder, quantize)
    else:
        _load_weights(model, manifest, folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    model.requires_grad_(True)  # adaptation modes froze parts while building; a loaded model is whole
    return LoadedTaskModel(model.to(device).eval(), tokenizer, tasks, manifest, folder)


# -- the task a task model was trained for ----------------------------------------------------
def source_task_node(loaded: LoadedTaskModel, ref: str) -> dict:
    """The `task` node to run with when a stage takes a task model and no `task=`
    (artifacts/task_model_manifest.py `recorded_task_node`)."""
    return recorded_task_node(loaded.tasks, loaded.manifest, loaded.folder, ref)


def check_task_matches(loaded: LoadedTaskModel, task_name: str, labels: list | None, ref: str) -> None:
    """A `task=` given with a task model must be one of its heads' tasks, with the same label
    order where the config fixes one: else one line naming both (before any work)."""
    if task_name not in loaded.tasks:
        raise ConfigError(
            f"task={task_name} differs from the task of source={ref} "
            f"({', '.join(loaded.tasks)}): leave task= out to take the source's"
        )
    known = loaded.tasks[task_name].labels
    if labels is not None and known is not None and [str(x) for x in labels] != list(known):
        raise ConfigError(
            f"task.labels={[str(x) for x in labels]} differ from the labels of source={ref}'s "
            f"{task_name} head ({list(known)}), in head order"
        )


# What a source summary says of its backbone, carried into a stage that takes the task model.
SOURCE_RECORD_FIELDS = ("model", "family", "objective", "tokenizer", "backbone_source", "backbone")


def source_summary(loaded: LoadedTaskModel) -> dict:
    """The summary.json of the run that saved `loaded` (next to export/task_model/), or {}."""
    for candidate in (loaded.folder.parent.parent / "summary.json", loaded.folder.parent / "summary.json"):
        if candidate.is_file():
            try:
                data = json.loads(candidate.read_text())
            except (OSError, json.JSONDecodeError):
                return {}
            return data if isinstance(data, dict) else {}
    return {}


def record_source(cfg, loaded: LoadedTaskModel, ref: str) -> dict:
    """Make `cfg` say which model a stage that takes a task model (compress, attack) runs on,
    before its run opens and writes config.yaml and the MLflow params: the `model` group becomes the
    source's model node, `objective` the objective its backbone was pre-trained with, and
    `resolved_backbone` the source's backbone record. Returns the summary fields that say the same
    (model, family, objective, tokenizer, backbone_source, backbone); a source saved before its run
    recorded them gives what its manifest knows."""
    from omegaconf import OmegaConf, open_dict

    recorded = source_summary(loaded)
    model_node = dict(loaded.manifest.get("model") or {})
    fields = {key: recorded.get(key) for key in SOURCE_RECORD_FIELDS}
    fields["model"] = fields["model"] or str(model_node.get("name", "")) or None
    fields["family"] = fields["family"] or model_node.get("family")
    fields["backbone_source"] = fields["backbone_source"] or ref
    with open_dict(cfg):
        if model_node:
            cfg.model = OmegaConf.create(model_node)
            if fields["model"]:
                cfg.model.name = fields["model"]
        if fields["objective"]:
            cfg.objective = {"name": str(fields["objective"])}
        if isinstance(fields["backbone"], dict):
            cfg.resolved_backbone = fields["backbone"]
    return {k: v for k, v in fields.items() if v is not None}

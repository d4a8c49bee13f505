"""A saved task model's folder and manifest, torch-free (the layout and every manifest key are in
artifacts/saved_task_model.py's docstring): what a stage's preflight reads of its source before
the training stack is imported (attacks/read_ahead.py), and what `load_task_model` starts from."""

from __future__ import annotations

import json
from pathlib import Path

from lightning_modules.artifacts.references import download_run_artifact, refuse_job_ref
from lightning_modules.tasks.spec import TaskSpec
from ptmlab.contracts import BackboneError, ConfigError
from ptmlab.methods.shipped import check_shipped_code

FORMAT_VERSION = 2  # the newest this reader reads; 1 is written unless there are compression edits
TASK_MODEL_DIR = "task_model"  # under <run dir>/export/
TASK_MODEL_ARTIFACT = "export/task_model"  # MLflow artifact path
MANIFEST_FILE = "task_model.json"
WEIGHTS_FILE = "model.safetensors"
HF_CONFIG_DIR = "backbone_config"
SINGLE, MULTI = "task_model", "multitask_model"
REQUIRED_KEYS = (
    "kind",
    "model",
    "adaptation",
    "pooling",
    "scalar_mix",
    "head_dropout",
    "heads",
    "tasks",
    "weights",
    "tokenizer_files",
)
BUILDABLE = {"model.backbone": "backbone", "adaptation": "adaptation"}  # key -> its slot (ptmlab.methods.shipped)


def task_model_folder(ref: str, tracking_uri: str | None = None) -> Path:
    """The task_model folder a reference names (see the module docstring)."""
    ref = str(ref)
    refuse_job_ref(ref, "task_model")
    if ref.startswith("mlflow:"):
        if tracking_uri is None:
            import mlflow  # MLflow's own default: $MLFLOW_TRACKING_URI (stages pass their cfg's URI)

            tracking_uri = mlflow.get_tracking_uri()
        return download_run_artifact(ref[len("mlflow:") :], TASK_MODEL_ARTIFACT, tracking_uri, "task_model")
    path = Path(ref).expanduser()
    if not path.is_dir():
        raise BackboneError(f"task_model={ref}: folder not found")
    candidates = (path / "export" / TASK_MODEL_DIR, path / TASK_MODEL_DIR, path)
    for folder in candidates:
        if (folder / MANIFEST_FILE).is_file():
            return folder
    for folder in candidates:
        if (folder / WEIGHTS_FILE).is_file():
            raise BackboneError(f"{folder / MANIFEST_FILE}: missing (a task model folder needs its manifest)")
    raise BackboneError(
        f"task_model={ref}: no {MANIFEST_FILE} in {path}, {path / TASK_MODEL_DIR} "
        f"or {path / 'export' / TASK_MODEL_DIR} (finetune and multitask runs write one)"
    )


def read_manifest(folder: Path) -> dict:
    path = Path(folder) / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise BackboneError(f"{path}: missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BackboneError(f"{path}: not valid JSON ({exc})") from None
    version = manifest.get("format_version") if isinstance(manifest, dict) else None
    if not isinstance(version, int) or isinstance(version, bool):
        raise BackboneError(f"{path}: format_version={version!r} is not a format version (an integer)")
    if version > FORMAT_VERSION:
        raise BackboneError(
            f"{path}: format_version={version} is newer than this ptmlab reads "
            f"({FORMAT_VERSION}); upgrade ptmlab to load it"
        )
    for key in REQUIRED_KEYS:
        if key not in manifest:
            raise BackboneError(f"{path}: missing key '{key}'")
    if manifest["kind"] not in (SINGLE, MULTI):
        raise BackboneError(f"{path}: kind={manifest['kind']!r} is not {SINGLE} or {MULTI}")
    if set(manifest["heads"]) != set(manifest["tasks"]) or not manifest["heads"]:
        raise BackboneError(f"{path}: heads {sorted(manifest['heads'])} and tasks {sorted(manifest['tasks'])} differ")
    for key, slot in BUILDABLE.items():
        node = manifest
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or not isinstance(node.get("_target_"), str):
            raise BackboneError(f"{path}: {key}._target_ is missing (a {slot} node)")
        check_shipped_code(node, str(path), slot=slot, path=key)
    for name, task in (manifest.get("task_configs") or {}).items():  # recorded_task_node builds their readers
        reader = task.get("data") if isinstance(task, dict) else None
        check_shipped_code(
            reader if isinstance(reader, dict) else {}, str(path), slot="reader", path=f"task_configs.{name}.data"
        )
    check_shipped_code(manifest, str(path))
    return manifest


def recorded_task_node(tasks: dict[str, TaskSpec], manifest: dict, folder: Path, ref: str) -> dict:
    """The `task` node to run with when a stage takes a task model and no `task=`: the one its
    manifest records (`task_configs`; older manifests: the `task` of the run's config.yaml), with
    the spec it was trained with laid over it (subset sizes, max_length, the labels in head
    order), so the stage reads the same task the head was trained on. ConfigError when the
    model has several heads or records no task config."""
    if len(tasks) != 1:
        raise ConfigError(f"source={ref} has heads for {', '.join(tasks)}: name one with task=<config>")
    ((name, spec),) = tasks.items()
    node = (manifest.get("task_configs") or {}).get(name)
    if node is None:
        node = _run_config_task(folder, name)
    if node is None:
        raise ConfigError(
            f"source={ref}: its {MANIFEST_FILE} records no config for task {name} (written before "
            f"ptmlab recorded one): give task=<the config of {name}>"
        )
    node = dict(node)
    node.update(
        max_train_samples=spec.max_train_samples, max_eval_samples=spec.max_eval_samples, max_length=spec.max_length
    )
    if spec.labels is not None:
        node["labels"] = list(spec.labels)
    return node


def _run_config_task(folder: Path, name: str) -> dict | None:
    """The `task` node of the config.yaml of the run that saved `folder` (…/export/task_model)."""
    from omegaconf import DictConfig, OmegaConf

    for candidate in (folder.parent.parent / "config.yaml", folder.parent / "config.yaml"):
        if candidate.is_file():
            task = OmegaConf.load(candidate).get("task")
            if isinstance(task, DictConfig) and str(task.get("name")) == name:
                node = OmegaConf.to_container(task, resolve=False)
                check_shipped_code(node.get("data") or {}, str(candidate), slot="reader", path="task.data")
                check_shipped_code(node, str(candidate), path="task")
                return node
    return None

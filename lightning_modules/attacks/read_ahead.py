"""stage=attack's preflight (`stage.preflight`, ptmlab.run): what can be read of the source and its
task before the training stack is imported. The source's manifest (a folder; an `mlflow:` source
is downloaded by the stage) says its task's kind, so a head attack cannot take (regression, token
level, ...) fails in seconds; the task's splits are read and returned (`ReadAhead`) for the stage
entry, as stage=finetune's preflight does (tasks/read_ahead.py)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from lightning_modules.artifacts.task_model_manifest import read_manifest, recorded_task_node, task_model_folder
from lightning_modules.tasks.read_ahead import ReadAhead, read_tasks
from lightning_modules.tasks.spec import TaskSpec
from ptmlab.contracts import BackboneError, ConfigError


def check_attackable(spec: TaskSpec, ref: str) -> None:
    """One label per example, from one text or a pair: what the word-level recipes flip."""
    if spec.kind != "classification":
        raise ConfigError(
            f"source={ref}: task {spec.name} is {spec.kind}; stage=attack takes classification "
            f"and pair-classification task models"
        )


def source_and_task(cfg: DictConfig) -> ReadAhead:
    ref = cfg.get("source")
    if not ref or cfg.get("attack") is None or str(ref).startswith(("mlflow:", "job:")):
        return ReadAhead()  # the stage says what is missing, downloads the MLflow run's model, refuses a job reference
    ref = str(ref)
    try:
        folder = task_model_folder(ref)
        manifest = read_manifest(folder)
        tasks = {str(name): TaskSpec.from_dict(spec) for name, spec in manifest["tasks"].items()}
    except (BackboneError, KeyError):
        return ReadAhead()  # the stage reports a source that does not load, naming what is wrong
    task = cfg.get("task")
    name = str(task.name) if task is not None else next(iter(tasks)) if len(tasks) == 1 else None
    if name not in tasks:
        return ReadAhead()  # the stage names the task= that differs, or asks for one
    check_attackable(tasks[name], ref)
    if task is None:
        # the node the stage sets as cfg.task (compress.py `use_source_task`), under the same `paths`
        task = OmegaConf.create(
            {
                "paths": OmegaConf.to_container(cfg.paths, resolve=True),
                "task": recorded_task_node(tasks, manifest, folder, ref),
            }
        ).task
    return ReadAhead(read_tasks(task))

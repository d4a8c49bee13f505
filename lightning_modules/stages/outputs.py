"""What a stage that trains task heads (finetune, multitask) leaves behind, besides its metrics:
the task model (always; stages/task_model.py), the backbone (`stage.export_backbone=true`;
stages/export.py), and the summary numbers every such run reports."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lightning_modules.adaptation.base import count_trainable
from lightning_modules.stages.backbone import ResolvedBackbone
from lightning_modules.stages.export import export_backbone
from lightning_modules.stages.pooling import PooledEncoder
from lightning_modules.stages.task_model import TASK_MODEL_ARTIFACT, TASK_MODEL_DIR, save_task_model
from lightning_modules.tasks.spec import TaskSpec

FULL_FINETUNING = {"name": "full", "_target_": "lightning_modules.adaptation.full.FullFineTuning"}


def adaptation_node(cfg: DictConfig) -> dict:
    """The run's `adaptation` node (full fine-tuning when none is selected)."""
    node = cfg.get("adaptation")
    return dict(FULL_FINETUNING) if node is None else OmegaConf.to_container(node, resolve=True)


def export_models(run, cfg: DictConfig, model: PooledEncoder, resolved: ResolvedBackbone,
                  tasks: dict[str, TaskSpec]) -> Path:
    """Exports into <run dir>/export/ and logs them to MLflow; returns the task model folder."""
    export_dir = run.run_dir / "export"
    if bool(cfg.stage.get("export_backbone", False)):
        # The config that rebuilt this backbone (a Hugging Face one turns it into one that loads hf/).
        export_backbone(model.backbone, OmegaConf.create(resolved.model_cfg), resolved.tokenizer, export_dir,
                        vocab_size=len(resolved.tokenizer))
        run.log_artifacts(export_dir, "export")
    task_dir = save_task_model(model, export_dir / TASK_MODEL_DIR, model_cfg=resolved.model_cfg,
                               tokenizer=resolved.tokenizer, tasks=tasks, adaptation=adaptation_node(cfg))
    run.log_artifacts(task_dir, TASK_MODEL_ARTIFACT)
    return task_dir


def training_numbers(model: PooledEncoder, module, trainer) -> dict:
    """The summary.json fields every run that trains a task model reports."""
    return {
        "trainable_params": count_trainable(model),
        "total_params": sum(p.numel() for p in model.parameters()),
        "train_time_s": round(module.train_time_s, 3),
        "steps": int(trainer.global_step),
        **throughput_numbers(trainer),
    }


def throughput_numbers(trainer) -> dict:
    """{"throughput": ...} from the run's ThroughputMonitor (stages/throughput.py), if it has one."""
    from lightning_modules.stages.throughput import ThroughputMonitor

    for callback in trainer.callbacks:
        if isinstance(callback, ThroughputMonitor):
            return {"throughput": callback.summary()}
    return {}

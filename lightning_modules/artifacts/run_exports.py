"""What a stage that trains task heads (finetune, multitask) leaves behind, besides its metrics:
the task model (always; artifacts/saved_task_model.py), the backbone (`stage.export_backbone=true`;
artifacts/backbone_export.py) and the adaptation's delta (export/delta.safetensors). The summary
numbers such a run reports are runtime/training_numbers.py."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lightning_modules.artifacts.backbone_export import export_backbone, write_backbone_manifest
from lightning_modules.artifacts.backbone_reference import ResolvedBackbone
from lightning_modules.artifacts.saved_task_model import save_task_model, task_configs_of
from lightning_modules.artifacts.task_model_manifest import TASK_MODEL_ARTIFACT, TASK_MODEL_DIR
from lightning_modules.heads.pooling import PooledEncoder
from lightning_modules.tasks.spec import TaskSpec

FULL_FINETUNING = {"name": "full", "_target_": "lightning_modules.adaptation.full.FullFineTuning"}


def adaptation_node(cfg: DictConfig, adaptation=None) -> dict:
    """The run's `adaptation` node (full fine-tuning when none is selected), as the mode saves it
    (`Adaptation.saved_node`: a merged LoRA, a prompt's resolved label tokens)."""
    node = cfg.get("adaptation")
    node = dict(FULL_FINETUNING) if node is None else OmegaConf.to_container(node, resolve=True)
    return adaptation.saved_node(node) if adaptation is not None else node


def export_models(
    run,
    cfg: DictConfig,
    model: PooledEncoder,
    resolved: ResolvedBackbone,
    tasks: dict[str, TaskSpec],
    adaptation=None,
    defence: dict | None = None,
) -> Path:
    """Exports into <run dir>/export/ and logs them to MLflow; returns the task model folder.
    `defence`: the adversarial training the run used, recorded in the task model's manifest."""
    export_dir = run.run_dir / "export"
    if bool(cfg.stage.get("export_backbone", False)):
        # The config that rebuilt this backbone (a Hugging Face one turns it into one that loads hf/).
        export_backbone(
            model.backbone,
            OmegaConf.create(resolved.model_cfg),
            resolved.tokenizer,
            export_dir,
            vocab_size=len(resolved.tokenizer),
        )
        # The backbone's record carried forward (its pre-training objective, tokenizer, corpus), this
        # run as the one that made the export; cfg's groups already say what ran (record_backbone).
        write_backbone_manifest(
            export_dir,
            {
                **resolved.record,
                "source_stage": str(cfg.stage.name),
                "source_job": OmegaConf.select(cfg, "tracking.job_id", default=None),
                "source_run": run.run_id,
                "source_run_dir": str(run.run_dir),
                "seed": int(cfg.seed),
                "fine_tuned_on": sorted(tasks),
                "configs": {
                    g: OmegaConf.to_container(cfg[g], resolve=True)
                    for g in ("objective", "tokenizer", "data")
                    if cfg.get(g) is not None
                },
            },
        )
        run.log_artifacts(export_dir, "export")
    task_dir = save_task_model(
        model,
        export_dir / TASK_MODEL_DIR,
        model_cfg=resolved.model_cfg,
        tokenizer=resolved.tokenizer,
        tasks=tasks,
        adaptation=adaptation_node(cfg, adaptation),
        task_configs=task_configs_of(cfg, tasks),
        defence=defence,
    )
    run.log_artifacts(task_dir, TASK_MODEL_ARTIFACT)
    return task_dir


DELTA_FILE = "delta.safetensors"  # under <run dir>/export/


def save_delta(run, state: dict) -> dict:
    """Writes what the task stores beside the shared backbone (the adaptation's `delta_state`) to
    export/delta.safetensors, logs it, and returns the summary fields: its parameter count and
    its size in bytes (the tensors' own bytes, as they train: fp32 unless cast)."""
    from safetensors.torch import save_file

    path = run.run_dir / "export" / DELTA_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().contiguous().cpu().clone() for name, t in state.items()}
    save_file(tensors, str(path))
    run.log_artifact(path, "export")
    return {
        "delta_params": sum(t.numel() for t in tensors.values()),
        "delta_bytes": sum(t.numel() * t.element_size() for t in tensors.values()),
    }

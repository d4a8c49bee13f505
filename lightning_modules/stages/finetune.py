"""stage=finetune: backbone + task + adaptation mode → task metrics on dev (and test
predictions in GLUE submission format), summary.json for the leaderboard."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from lightning_modules.adaptation.base import count_trainable
from lightning_modules.stages.backbone import resolve_backbone
from lightning_modules.stages.common import StageRun, tracking_uri
from lightning_modules.stages.export import export_backbone
from lightning_modules.stages.finetune_module import FinetuneModule, TaskModel
from lightning_modules.tasks.datamodule import TaskDataModule
from lightning_modules.tasks.metrics import prediction_stats
from lightning_modules.tasks.predictions import write_glue_submission, write_predictions
from lightning_modules.tasks.spec import load_task
from ptmlab.errors import ConfigError

NON_ARGUMENT_KEYS = ("name", "compatible_families")


def build_adaptation(adaptation_cfg: DictConfig | None):
    if adaptation_cfg is None:
        from lightning_modules.adaptation.full import FullFineTuning

        return FullFineTuning()
    node = OmegaConf.to_container(adaptation_cfg, resolve=True)
    for key in NON_ARGUMENT_KEYS:
        node.pop(key, None)
    return instantiate(node)


def run_finetune(cfg: DictConfig) -> dict:
    import lightning.pytorch as pl

    stage = cfg.stage
    if cfg.get("task") is None:
        raise ConfigError("stage=finetune needs a task (task=glue/sst2, task=senteval/mr, task=tabular ...)")
    pl.seed_everything(int(cfg.seed), workers=True, verbose=False)
    # Everything that can fail on bad input happens before the MLflow run opens.
    task = load_task(cfg.task)
    resolved = resolve_backbone(cfg, tracking_uri(cfg))
    adaptation = build_adaptation(cfg.get("adaptation"))
    model = TaskModel(resolved.backbone, task.num_labels, pooling=str(stage.pooling),
                      head_dropout=float(stage.head_dropout), scalar_mix=adaptation.uses_scalar_mix)
    adaptation.prepare(model)
    datamodule = TaskDataModule(task, resolved.tokenizer, causal=bool(resolved.backbone.is_causal),
                                batch_size=int(stage.batch_size), eval_batch_size=int(stage.eval_batch_size),
                                seed=int(cfg.seed))
    steps_per_epoch = math.ceil(len(task.train) / int(stage.batch_size))
    total_steps = int(stage.max_steps) if stage.get("max_steps") else steps_per_epoch * int(stage.epochs)
    module = FinetuneModule(model, adaptation, task, cfg.optimizer, cfg.get("scheduler"), lr=float(stage.lr),
                            total_steps=total_steps, val_split_names=datamodule.split_names_val)
    adaptation_name = str(cfg.adaptation.name) if cfg.get("adaptation") is not None else "full"

    with StageRun(cfg) as run:
        run.log_data_files([Path(s.source) for s in task.data.splits.values() if Path(s.source).is_file()])
        trainer = run.build_trainer(max_steps=total_steps, max_epochs=int(stage.epochs),
                                    val_check_interval=1.0, check_val_every_n_epoch=int(stage.val_every_n_epochs),
                                    limit_val_batches=1.0)
        model.train()  # Hugging Face checkpoints load in eval mode
        trainer.fit(module, datamodule=datamodule, ckpt_path=run.resume_checkpoint)
        if not module.last_metrics:  # resumed after the last validation, or no epoch boundary
            trainer.validate(module, datamodule=datamodule, verbose=False)
        metrics = dict(module.last_metrics)
        predictions = trainer.predict(module, dataloaders=datamodule.predict_dataloader())
        if len(datamodule.split_names_predict) == 1:
            predictions = [predictions]  # Lightning returns a flat list for a single dataloader
        stats = {}
        if predictions:
            pred_dir = run.run_dir / "predictions"
            for split_name, batches in zip(datamodule.split_names_predict, predictions):
                preds = torch.cat(batches)
                split = task.data.splits[split_name]
                if split_name in datamodule.split_names_val:
                    if bool(stage.write_predictions):
                        write_predictions(pred_dir / f"{split_name}.tsv", split, preds.tolist(), task.spec)
                    if split_name == datamodule.split_names_val[0] and not task.spec.is_regression:
                        labels = torch.tensor([ex.label for ex in split.examples])
                        stats = prediction_stats(preds, labels)
                elif bool(stage.write_predictions):
                    write_glue_submission(pred_dir / "glue_submission", split, preds.tolist(), task.spec)
            if pred_dir.exists():
                run.log_artifacts(pred_dir, "predictions")
        if bool(stage.export_backbone):
            model_cfg = OmegaConf.create({"name": resolved.model_name}) if resolved.backbone.family == "hf" else cfg.model
            export_dir = export_backbone(model.backbone, model_cfg, resolved.tokenizer, run.run_dir / "export",
                                         vocab_size=len(resolved.tokenizer))
            run.log_artifacts(export_dir, "export")
        main_key = task.spec.metric_key(task.spec.main_metric, datamodule.split_names_val[0])
        summary = {
            "model": resolved.model_name,
            "objective": resolved.objective,
            "adaptation": adaptation_name,
            "task": task.spec.name,
            "backbone_source": resolved.source,
            "metrics": metrics,
            "main_metric": main_key,
            "main_score": metrics.get(main_key),
            "prediction_stats": stats,
            "trainable_params": count_trainable(model),
            "total_params": sum(p.numel() for p in model.parameters()),
            "train_time_s": round(module.train_time_s, 3),
            "steps": int(trainer.global_step),
        }
        run.write_summary(summary)
    return summary

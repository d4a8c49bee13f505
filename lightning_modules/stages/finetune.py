"""stage=finetune: backbone + task + adaptation mode → task metrics on dev (and test
predictions in GLUE submission format), the task model (export/task_model/, loadable with
`load_task_model`), summary.json for the leaderboard.

`build_finetune(cfg)` makes the parts (benches and other stages reuse it); `run_finetune(cfg)`
trains them inside a `StageRun`."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from lightning_modules.adaptation.adversarial import AdversarialTraining, build_defence
from lightning_modules.adaptation.base import Adaptation
from lightning_modules.adaptation.from_config import build_adaptation
from lightning_modules.artifacts.backbone_reference import (
    ResolvedBackbone,
    backbone_summary,
    record_backbone,
    resolve_backbone,
)
from lightning_modules.artifacts.run_exports import export_models, save_delta
from lightning_modules.attacks.augmentation import AttackAugmentation
from lightning_modules.heads.generation_model import decode_split
from lightning_modules.heads.generation_model_for import generation_model_for
from lightning_modules.heads.multiple_choice_model import MultipleChoiceModel
from lightning_modules.heads.task_model import TaskModel
from lightning_modules.runtime.stage_run import StageRun, tracking_uri
from lightning_modules.runtime.training_numbers import training_numbers
from lightning_modules.stages.finetune_module import FinetuneModule
from lightning_modules.tasks.choice_metrics import NORMALISATION, write_choice_predictions
from lightning_modules.tasks.confusion import CONFUSION_FILE, classification_outcome, tag_confusion
from lightning_modules.tasks.datamodule import TaskDataModule
from lightning_modules.tasks.encoding import in_split_order
from lightning_modules.tasks.generation_metrics import score_split
from lightning_modules.tasks.generation_predictions import write_generations
from lightning_modules.tasks.metrics import prediction_stats
from lightning_modules.tasks.predictions import write_glue_submission, write_predictions
from lightning_modules.tasks.read_ahead import ReadAhead
from lightning_modules.tasks.span_answers import SpanWindows, best_spans, write_span_predictions
from lightning_modules.tasks.span_metrics import SPAN_METRIC_MODES
from lightning_modules.tasks.spec import LoadedTask
from lightning_modules.tasks.tagged_predictions import gold_tags, word_tags, write_tagged_predictions
from lightning_modules.tasks.token_metrics import TOKEN_METRIC_MODES
from ptmlab.contracts.decoding import DecodingSettings
from ptmlab.contracts.identity import config_hash
from ptmlab.contracts.recipes import MIN_STEPS, effective_recipe, recipe_warnings
from ptmlab.contracts.summaries import FinetuneSummary

log = logging.getLogger(__name__)


@dataclass
class FinetuneParts:
    task: LoadedTask
    resolved: ResolvedBackbone  # backbone, tokenizer and where they came from
    adaptation: Adaptation
    model: TaskModel  # adaptation.prepare()d
    datamodule: TaskDataModule
    module: FinetuneModule
    total_steps: int
    # what is unusual in the run's hyper-parameters (ptmlab.recipes.recipe_warnings): logged, in the summary
    recipe_warnings: list[str]
    adversarial: AdversarialTraining | None = None  # `defence=freelb | pgd`
    augmentation: AttackAugmentation | None = None  # `defence=augment`: the train split holds its examples

    @property
    def defence(self) -> dict | None:
        """The defence as the summary and the task model record it (null: plain training)."""
        defence = self.adversarial or self.augmentation
        return defence.settings() if defence is not None else None


def build_finetune(cfg: DictConfig, read_ahead: ReadAhead | None = None) -> FinetuneParts:
    """Seeded, everything `run_finetune` trains. Whatever can fail on bad input fails here,
    before any MLflow run opens. `read_ahead`: what the preflight read (None: read here)."""
    import lightning.pytorch as pl

    stage = cfg.stage
    pl.seed_everything(int(cfg.seed), workers=True, verbose=False)
    ahead = read_ahead or ReadAhead()
    task = ahead.task(cfg.task)
    defence = build_defence(cfg.get("defence"))
    augmentation = defence if isinstance(defence, AttackAugmentation) else None
    adversarial = None if augmentation is not None else defence
    if augmentation is not None:
        task = augmentation.augment(task)  # a source that is no attack run fails here, before the backbone loads
    resolved = resolve_backbone(cfg, tracking_uri(cfg), ahead.corpus_tokenizer)
    record_backbone(cfg, resolved)  # the stored config and MLflow params say which backbone runs
    if task.spec.is_multiple_choice and task.spec.choice_scoring == "auto":  # a decoder scores by log-likelihood
        scoring = "log_likelihood" if resolved.backbone.is_causal else "head"
        task = dataclasses.replace(task, spec=dataclasses.replace(task.spec, choice_scoring=scoring))
    adaptation = build_adaptation(cfg.get("adaptation"))
    adaptation.bind(task, resolved)
    if defence is not None:
        defence.check(adaptation)
    # Token classification and span extraction: the head reads every position (heads/pooling.py
    # `tokens`, `spans`), whatever stage.pooling says.
    pooling = "tokens" if task.spec.is_token_level else "spans" if task.spec.is_span_level else str(stage.pooling)
    if task.spec.is_generation:  # the decoder's states on the token table (heads/generation_model.py)
        DecodingSettings.from_dict(task.spec.generation).check(vocab_size=len(resolved.tokenizer))
        # no dropout of its own before the tied LM head: the decoder's last layer has T5's/BART's
        model = generation_model_for(
            resolved.backbone,
            task_name=task.spec.name,
            head_dropout=0.0,
            max_target_length=task.spec.max_target_length,
            source_prefix=task.spec.source_prefix,
            scalar_mix=adaptation.uses_scalar_mix,
        )
        model.hf_generator()  # a backbone without a generate() twin is refused here, not after training
    elif task.spec.is_multiple_choice:  # one score per (context, choice) (heads/multiple_choice_model.py)
        model = MultipleChoiceModel(
            resolved.backbone,
            scoring=task.spec.choice_scoring,
            pooling=str(stage.pooling),
            head_dropout=float(stage.head_dropout),
            scalar_mix=adaptation.uses_scalar_mix,
            task_name=task.spec.name,
        )
    else:
        model = TaskModel(
            resolved.backbone,
            task.num_labels,
            pooling=pooling,
            head_dropout=float(stage.head_dropout),
            scalar_mix=adaptation.uses_scalar_mix,
            task_name=task.spec.name,
        )
    adaptation.prepare(model)
    datamodule = TaskDataModule(
        task,
        resolved.tokenizer,
        causal=bool(resolved.backbone.is_causal),
        batch_size=int(stage.batch_size),
        eval_batch_size=int(stage.eval_batch_size),
        seed=int(cfg.seed),
        group_by_length=bool(stage.get("group_by_length", False)),
        encoder=model.input_encoder(resolved.tokenizer, task.spec.max_length, doc_stride=task.spec.doc_stride),
    )
    # span extraction trains on windows, several per long context: an epoch is as many batches as they fill
    rows = len(datamodule.encoded(task.data.train_split)) if task.spec.is_span_level else len(task.train)
    steps_per_epoch = math.ceil(rows / int(stage.batch_size))
    total_steps = int(stage.max_steps) if stage.get("max_steps") else steps_per_epoch * int(stage.epochs)
    module = FinetuneModule(
        model,
        adaptation,
        task,
        cfg.optimizer,
        cfg.get("scheduler"),
        lr=float(stage.lr),
        total_steps=total_steps,
        val_split_names=datamodule.split_names_val,
        adversarial=adversarial,
    )
    accumulate = int(cfg.trainer.get("accumulate_grad_batches") or 1)
    warnings = recipe_warnings(
        cfg,
        train_rows=rows,
        optimizer_steps=total_steps // accumulate if adaptation.trains else MIN_STEPS,
        effective_batch=int(stage.batch_size) * accumulate,
    )
    for line in warnings:
        log.warning("recipe: %s", line)
    return FinetuneParts(
        task, resolved, adaptation, model, datamodule, module, total_steps, warnings, adversarial, augmentation
    )


def write_prediction_files(run: StageRun, trainer, parts: FinetuneParts, write: bool) -> dict:
    """Dev/test predictions (TSV, GLUE submission format) logged as `predictions`; returns the
    first eval split's prediction_stats (classification: with its `baseline`), and its `confusion`
    report (classification and token classification; also predictions/confusion.json)."""
    datamodule, task = parts.datamodule, parts.task
    predictions = trainer.predict(parts.module, dataloaders=datamodule.predict_dataloader())
    if len(datamodule.split_names_predict) == 1:
        predictions = [predictions]  # Lightning returns a flat list for a single dataloader
    stats = {}
    if not predictions:
        return stats
    pred_dir = run.run_dir / "predictions"
    for split_name, batches in zip(datamodule.split_names_predict, predictions):
        split = task.data.splits[split_name]
        if task.spec.is_span_level:  # one JSON line per question: id, predicted answer, gold answers
            if write:
                threshold = parts.module.last_metrics.get(task.spec.metric_key("no_answer_threshold", split_name))
                write_span_predictions(
                    pred_dir / f"{split_name}.{task.spec.name}.jsonl",
                    split,
                    best_spans(task.spec, split, SpanWindows.cat(batches)),
                    threshold,
                )
            continue
        preds = in_split_order(batches)  # (example indices, rows) per batch, read longest first
        if task.spec.is_multiple_choice:  # one JSON line per example: the chosen index and every choice's score
            if write:
                write_choice_predictions(pred_dir / f"{split_name}.{task.spec.name}.jsonl", split, preds, task.spec)
            if split_name == datamodule.split_names_val[0]:
                stats = prediction_stats(preds, torch.tensor([ex.label for ex in split.examples]))
            continue
        if task.spec.is_token_level:  # every split, scored or not, as the input's columns + the predicted tag
            tags = word_tags(task.spec, split, preds)
            if write:
                write_tagged_predictions(pred_dir / f"{split_name}.{task.spec.name}.tsv", split, tags)
            if split_name == datamodule.split_names_val[0]:
                stats["confusion"] = tag_confusion(
                    task.spec.labels, gold_tags(task.spec, split), tags, [ex.words for ex in split.examples]
                )
                write_confusion(pred_dir, stats["confusion"])
            continue
        logits = preds
        if not task.spec.is_regression:
            preds = logits.argmax(-1)
        if split_name in datamodule.split_names_val:
            if write:
                write_predictions(pred_dir / f"{split_name}.tsv", split, preds.tolist(), task.spec)
            if split_name == datamodule.split_names_val[0] and not task.spec.is_regression:
                labels = torch.tensor([ex.label for ex in split.examples])
                stats = prediction_stats(preds, labels)
                report, baseline = classification_outcome(task, split_name, logits, labels.tolist())
                write_confusion(pred_dir, report)
                if baseline is not None:
                    stats["baseline"] = baseline
                stats["confusion"] = report
        elif write:
            write_glue_submission(pred_dir / "glue_submission", split, preds.tolist(), task.spec)
    if pred_dir.exists():
        run.log_artifacts(pred_dir, "predictions")
    return stats


def write_confusion(pred_dir: Path, report: dict) -> None:
    pred_dir.mkdir(parents=True, exist_ok=True)
    (pred_dir / CONFUSION_FILE).write_text(json.dumps(report, indent=1))


def write_generation_files(run: StageRun, parts: FinetuneParts, write: bool) -> dict:
    """Generation: every eval and test split decoded with the task's settings, written as
    source / reference(s) / output lines (predictions/<split>.jsonl); returns the summary's
    `generation` entry: the settings, each scored split's metric signatures, and the decoding
    speed (generated tokens/s, latency per example) over all of them."""
    task, model = parts.task, parts.model
    settings = DecodingSettings.from_dict(task.spec.generation)
    pred_dir = run.run_dir / "predictions"
    signatures, tokens, seconds, examples = {}, 0, 0.0, 0
    for split_name in parts.datamodule.split_names_predict:
        decoded = decode_split(
            model, parts.resolved.tokenizer, task, split_name, settings, batch_size=int(run.cfg.stage.eval_batch_size)
        )
        tokens, seconds, examples = (
            tokens + decoded.new_tokens,
            seconds + decoded.seconds,
            examples + len(decoded.outputs),
        )
        split = task.data.splits[split_name]
        if split.has_labels:
            signatures.update(score_split(task, split_name, decoded.outputs)[1])
        if write:
            write_generations(pred_dir / f"{split_name}.jsonl", split, decoded.outputs)
    if write and pred_dir.exists():
        run.log_artifacts(pred_dir, "predictions")
    return {
        "decoding": settings.to_dict(),
        "metric_signatures": signatures,
        "generated_tokens": tokens,
        "tokens_per_s": round(tokens / seconds, 3) if seconds > 0 else None,
        "latency_ms_per_example": round(1000.0 * seconds / max(examples, 1), 3),
    }


def run_finetune(cfg: DictConfig, read_ahead: ReadAhead | None = None) -> dict:
    stage = cfg.stage
    parts = build_finetune(cfg, read_ahead)
    task, model, module, datamodule = parts.task, parts.model, parts.module, parts.datamodule
    with StageRun(cfg) as run:
        run.log_data_files([Path(s.source) for s in task.data.splits.values() if Path(s.source).is_file()])
        trainer = run.build_trainer(
            max_steps=parts.total_steps,
            max_epochs=int(stage.epochs),
            val_check_interval=1.0,
            check_val_every_n_epoch=int(stage.val_every_n_epochs),
            limit_val_batches=1.0,
            flops_per_token=module.training_flops_per_token,
            distributed=False,
        )
        model.train()  # Hugging Face checkpoints load in eval mode
        if parts.adaptation.trains:
            trainer.fit(module, datamodule=datamodule, ckpt_path=run.resume_checkpoint)
        if not module.last_metrics:  # resumed after the last validation, no epoch boundary, or zero-shot
            trainer.validate(module, datamodule=datamodule, verbose=False)
        metrics = dict(module.last_metrics)
        # What trained and the delta (what a task stores beside the shared backbone), before
        # `finalize` folds it away (a merged LoRA is a plain, frozen model).
        numbers = training_numbers(model, module, trainer)
        delta = save_delta(run, parts.adaptation.delta_state(model))
        parts.adaptation.finalize(model)
        run.progress.phase("predicting")
        if task.spec.is_generation:
            generation, stats = write_generation_files(run, parts, bool(stage.write_predictions)), {}
        else:
            generation, stats = None, write_prediction_files(run, trainer, parts, bool(stage.write_predictions))
        confusion, baseline = stats.pop("confusion", None), stats.pop("baseline", None)
        run.progress.phase("exporting the task model")
        task_model_dir = export_models(
            run,
            cfg,
            model,
            parts.resolved,
            {task.spec.name: task.spec},
            adaptation=parts.adaptation,
            defence=parts.defence,
        )
        main_key = task.spec.metric_key(task.spec.main_metric, datamodule.split_names_val[0])
        if baseline:
            baseline["metric"] = main_key
        summary = run.summary(
            FinetuneSummary,
            model=parts.resolved.model_name,
            objective=parts.resolved.objective,
            adaptation=str(cfg.adaptation.name) if cfg.get("adaptation") is not None else "full",
            # the defence it was trained with (null: plain training), for comparing attack results
            defence=parts.defence,
            task=task.spec.name,
            task_kind=task.spec.kind,
            backbone_source=parts.resolved.source,
            **backbone_summary(parts.resolved),
            config_hash=config_hash(OmegaConf.to_container(cfg, resolve=True)),
            recipe=effective_recipe(cfg),
            **({"warnings": parts.recipe_warnings} if parts.recipe_warnings else {}),
            metrics=metrics,
            main_metric=main_key,
            main_score=metrics.get(main_key),
            prediction_stats=stats,
            **({"confusion": confusion} if confusion else {}),
            **({"baseline": baseline} if baseline else {}),
            **({"metric_modes": TOKEN_METRIC_MODES} if task.spec.is_token_level else {}),
            # SQuAD EM/F1 on ptmlab's 0-1 scale; v2.0: the no-answer threshold chosen on dev (null: v1.1)
            **(
                {"metric_modes": SPAN_METRIC_MODES, "no_answer_threshold": metrics.get("no_answer_threshold")}
                if task.spec.is_span_level
                else {}
            ),
            **({"generation": generation} if generation is not None else {}),
            # where the splits came from when a reader drew or split them (SuperGLUE: few-shot, a split of dev)
            **({"data_origin": task.data.origin} if task.data.origin else {}),
            # how choices were scored; accuracy_norm (log-likelihood) divides by the choice's characters
            **(
                {
                    "multiple_choice": {
                        "scoring": task.spec.choice_scoring,
                        **({"normalisation": NORMALISATION} if "accuracy_norm" in metrics else {}),
                    }
                }
                if task.spec.is_multiple_choice
                else {}
            ),
            # what the reader says of the data (a seeded split of a validation set, a subset ...)
            **({"data_notes": list(task.data.notes)} if task.data.notes else {}),
            **numbers,
            **delta,
            task_model_dir=task_model_dir,
        )
        run.write_summary(summary)
    return summary.model_dump(mode="json", exclude_unset=True)

"""stage=multitask: one shared encoder, one head per task, each step trains on one task drawn by
the task sampler (MT-DNN, Liu et al. 2019): p_t ∝ n_t^(1/T) over the tasks' training-set sizes.

    python -m ptmlab.run stage=multitask model=minilm 'stage.tasks=[glue/sst2,glue/rte]' \
        stage.sampling=temperature stage.temperature=2 stage.max_steps=2000

Each task's config is `conf/task/<name>.yaml` (the `task=` group, read directly because a
running Hydra app cannot compose another group member); `stage.max_train_samples` /
`stage.max_eval_samples` subset every task, `stage.task_overrides.<task name>` patches one.
Validation logs `val/<task>/<metric>` for every task; summary.json carries `task_metrics`.
The task model (shared encoder and every head) is saved to export/task_model/ (`load_task_model`);
`stage.export_backbone=true` exports the shared encoder too (multi-task, then a target task).
`build_multitask(cfg)` makes the parts, `run_multitask(cfg)` trains them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import lightning.pytorch as pl
import torch
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import DataLoader, IterableDataset

from lightning_modules.artifacts.backbone_reference import (
    ResolvedBackbone,
    backbone_summary,
    record_backbone,
    resolve_backbone,
)
from lightning_modules.artifacts.run_exports import export_models
from lightning_modules.heads.evaluation import prediction_scores, split_metrics, task_loss
from lightning_modules.heads.multitask_model import MultiTaskModel
from lightning_modules.optim import build_optimizer, build_scheduler, decay_param_groups
from lightning_modules.runtime.stage_run import StageRun, tracking_uri
from lightning_modules.runtime.training_numbers import training_numbers
from lightning_modules.tasks.confusion import classification_outcome
from lightning_modules.tasks.datamodule import TaskDataModule
from lightning_modules.tasks.encoding import in_split_order
from lightning_modules.tasks.read_ahead import ReadAhead
from lightning_modules.tasks.sampling import TaskSampler, temperature_for
from lightning_modules.tasks.spec import LoadedTask
from ptmlab.contracts import ConfigError
from ptmlab.contracts.identity import config_hash
from ptmlab.contracts.summaries import FinetuneSummary
from ptmlab.contracts.task_checks import multitask_task_nodes


# -- task configs ---------------------------------------------------------------------------
def load_tasks(cfg: DictConfig, read_ahead: ReadAhead | None = None) -> dict[str, LoadedTask]:
    """Task name (the config's `name`: sst2, rte ...) -> loaded task, in `stage.tasks` order (the
    preflight's read of a node, else read here). The names resolve to task nodes torch-free
    (`multitask_task_nodes`), so the API refuses a bad list at submission already."""
    ahead = read_ahead or ReadAhead()
    return {name: ahead.task(node) for name, node in multitask_task_nodes(cfg).items()}


# -- data -----------------------------------------------------------------------------------
class SampledTaskBatches(IterableDataset):
    """(task name, batch) for steps `start_step`..`num_steps`-1: the task from the sampler, the
    batch the next of that task's (shuffled) train loader, which starts a new epoch when it runs
    out. A resumed run starts at its restored step: the skipped steps are drawn and their batches
    taken (not trained on), so it goes on exactly where the interrupted run stopped."""

    def __init__(self, loaders: dict[str, DataLoader], sampler: TaskSampler, num_steps: int, start_step: int = 0):
        self.loaders, self.sampler = loaders, sampler
        self.num_steps, self.start_step = int(num_steps), int(start_step)

    def __iter__(self):
        iterators: dict[str, object] = {}
        for step, name in enumerate(self.sampler.iterate(self.num_steps)):
            try:
                batch = next(iterators[name])
            except (KeyError, StopIteration):
                iterators[name] = iter(self.loaders[name])
                batch = next(iterators[name])
            if step >= self.start_step:
                yield name, batch


class MultiTaskDataModule(pl.LightningDataModule):
    def __init__(
        self,
        tasks: dict[str, LoadedTask],
        tokenizer,
        *,
        causal: bool,
        sampler: TaskSampler,
        num_steps: int,
        batch_size: int,
        eval_batch_size: int,
        seed: int,
    ):
        super().__init__()
        self.per_task = {
            name: TaskDataModule(
                task, tokenizer, causal=causal, batch_size=batch_size, eval_batch_size=eval_batch_size, seed=seed
            )
            for name, task in tasks.items()
        }
        self.sampler, self.num_steps = sampler, num_steps
        # dataloader_idx i of validation is (task, eval split) val_index[i]
        self.val_index = [(name, split) for name, dm in self.per_task.items() for split in dm.split_names_val]

    def train_dataloader(self) -> DataLoader:
        loaders = {name: dm.train_dataloader() for name, dm in self.per_task.items()}
        # Lightning restores the checkpoint's step before it asks for the loader (resume=true).
        trainer = self.trainer
        done = int(trainer.global_step) * int(trainer.accumulate_grad_batches) if trainer is not None else 0
        # batch_size=None: the stream already yields whole batches
        return DataLoader(SampledTaskBatches(loaders, self.sampler, self.num_steps, start_step=done), batch_size=None)

    def val_dataloader(self) -> list[DataLoader]:
        return [loader for dm in self.per_task.values() for loader in dm.val_dataloader()]


# -- training -------------------------------------------------------------------------------
class MultiTaskModule(pl.LightningModule):
    def __init__(
        self,
        model: MultiTaskModel,
        tasks: dict[str, LoadedTask],
        val_index: list[tuple[str, str]],
        optimizer_cfg,
        scheduler_cfg,
        lr: float,
        total_steps: int,
    ):
        super().__init__()
        self.model, self.tasks, self.val_index = model, tasks, val_index
        self.optimizer_cfg, self.scheduler_cfg = optimizer_cfg, scheduler_cfg
        self.lr, self.total_steps = lr, total_steps
        self.task_steps = {name: 0 for name in tasks}  # batches trained per task (this process)
        self.last_metrics: dict[str, dict[str, float]] = {}
        self.train_time_s = 0.0
        self._fit_started: float | None = None
        self._outputs: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        # per task, its first eval split's (name, scores in split order, labels) at the last validation
        self.last_scores: dict[str, tuple[str, torch.Tensor, torch.Tensor]] = {}

    def on_fit_start(self) -> None:
        self._fit_started = time.perf_counter()

    def on_fit_end(self) -> None:
        if self._fit_started is not None:
            self.train_time_s = time.perf_counter() - self._fit_started

    def _loss(self, task: str, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return task_loss(self.tasks[task].spec, logits, labels)

    def training_step(self, batch, batch_idx):
        task, inputs = batch
        logits = self.model(task, inputs)
        loss = self._loss(task, logits, inputs["labels"])
        self.task_steps[task] += 1
        n = len(logits)
        self.log("train/loss", loss, prog_bar=True, batch_size=n)
        self.log(f"train/{task}/loss", loss, batch_size=n)
        self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], batch_size=n)
        return loss

    def on_validation_epoch_start(self) -> None:
        self._outputs = {}

    def validation_step(self, batch, batch_idx, dataloader_idx: int = 0):
        task, _ = self.val_index[dataloader_idx]
        preds = prediction_scores(self.tasks[task].spec, self.model(task, batch))
        # the loader reads longest first: rows go back to split order at the epoch's end
        self._outputs.setdefault(dataloader_idx, []).append(
            (batch["example_index"].cpu(), preds.cpu(), batch["labels"].cpu())
        )

    def on_validation_epoch_end(self) -> None:
        metrics: dict[str, dict[str, float]] = {}
        for idx, outputs in sorted(self._outputs.items()):
            task_name, split = self.val_index[idx]
            preds = in_split_order([(i, p) for i, p, _ in outputs])
            labels = in_split_order([(i, y) for i, _, y in outputs])
            if task_name not in metrics:  # a task's first eval split: its confusion and baseline read these
                self.last_scores[task_name] = (split, preds, labels)
            metrics.setdefault(task_name, {}).update(split_metrics(self.tasks[task_name], split, preds, labels))
        for task_name, values in metrics.items():
            for key, value in values.items():
                self.log(f"val/{task_name}/{key}", value)
        self.last_metrics = metrics

    def configure_optimizers(self):
        weight_decay = float(self.optimizer_cfg.get("weight_decay", 0.0))
        optimizer = build_optimizer(
            decay_param_groups(self.model.named_parameters(), weight_decay, lr=self.lr),
            self.optimizer_cfg,
            self._trainer,
        )
        scheduler = build_scheduler(optimizer, self.scheduler_cfg, self.total_steps)
        return optimizer if scheduler is None else {"optimizer": optimizer, "lr_scheduler": scheduler}


@dataclass
class MultitaskParts:
    tasks: dict[str, LoadedTask]
    sizes: dict[str, int]  # training rows per task: what the sampler draws by
    sampler: TaskSampler
    temperature: float
    total_steps: int
    resolved: ResolvedBackbone
    model: MultiTaskModel
    datamodule: MultiTaskDataModule
    module: MultiTaskModule


def build_multitask(cfg: DictConfig, read_ahead: ReadAhead | None = None) -> MultitaskParts:
    """The parts `run_multitask` trains, seeded; bad input (sampling, tasks, backbone) fails
    here, before an MLflow run is opened. `read_ahead`: what the preflight read (None: read here)."""
    stage = cfg.stage
    pl.seed_everything(int(cfg.seed), workers=True, verbose=False)
    temperature = temperature_for(str(stage.sampling), stage.get("temperature"))
    if not stage.get("max_steps") or int(stage.max_steps) <= 0:
        raise ConfigError(f"stage.max_steps={stage.get('max_steps')} must be a positive number of steps")
    total_steps = int(stage.max_steps)
    ahead = read_ahead or ReadAhead()
    tasks = load_tasks(cfg, ahead)
    sizes = {name: len(task.train) for name, task in tasks.items()}
    sampler = TaskSampler(sizes, temperature=temperature, seed=int(cfg.seed))
    resolved = resolve_backbone(cfg, tracking_uri(cfg), ahead.corpus_tokenizer)
    record_backbone(cfg, resolved)  # the stored config and MLflow params say which backbone runs
    model = MultiTaskModel(
        resolved.backbone,
        {name: t.num_labels for name, t in tasks.items()},
        pooling=str(stage.pooling),
        head_dropout=float(stage.head_dropout),
    )
    datamodule = MultiTaskDataModule(
        tasks,
        resolved.tokenizer,
        causal=bool(resolved.backbone.is_causal),
        sampler=sampler,
        num_steps=total_steps,
        batch_size=int(stage.batch_size),
        eval_batch_size=int(stage.eval_batch_size),
        seed=int(cfg.seed),
    )
    module = MultiTaskModule(
        model,
        tasks,
        datamodule.val_index,
        cfg.optimizer,
        cfg.get("scheduler"),
        lr=float(stage.lr),
        total_steps=total_steps,
    )
    return MultitaskParts(tasks, sizes, sampler, temperature, total_steps, resolved, model, datamodule, module)


def classification_outcomes(
    tasks: dict[str, LoadedTask], scores: dict[str, tuple[str, torch.Tensor, torch.Tensor]]
) -> tuple[dict[str, dict], dict[str, dict]]:
    """Each classification task's confusion report and majority-class baseline on its first eval split."""
    confusions, baselines = {}, {}
    for name, (split, logits, labels) in scores.items():
        task = tasks[name]
        if task.spec.kind != "classification":
            continue
        confusions[name], baseline = classification_outcome(task, split, logits, labels.tolist())
        if baseline is not None:
            baselines[name] = {**baseline, "metric": task.spec.metric_key(task.spec.main_metric, split)}
    return confusions, baselines


def run_multitask(cfg: DictConfig, read_ahead: ReadAhead | None = None) -> dict:
    stage = cfg.stage
    parts = build_multitask(cfg, read_ahead)
    tasks, model, module, datamodule = parts.tasks, parts.model, parts.module, parts.datamodule
    total_steps = parts.total_steps
    val_every = int(stage.get("val_every_n_steps") or total_steps)

    with StageRun(cfg) as run:
        run.log_data_files(
            sorted({Path(s.source) for t in tasks.values() for s in t.data.splits.values() if Path(s.source).is_file()})
        )
        trainer = run.build_trainer(
            max_steps=total_steps,
            max_epochs=1,
            val_check_interval=min(val_every, total_steps),
            check_val_every_n_epoch=None,
            limit_val_batches=1.0,
            distributed=False,
        )
        model.train()  # Hugging Face checkpoints load in eval mode
        trainer.fit(module, datamodule=datamodule, ckpt_path=run.resume_checkpoint)
        if not module.last_metrics:
            trainer.validate(module, datamodule=datamodule, verbose=False)
        task_metrics = {name: dict(module.last_metrics.get(name, {})) for name in tasks}
        confusions, baselines = classification_outcomes(tasks, module.last_scores)
        task_model_dir = export_models(run, cfg, model, parts.resolved, {name: t.spec for name, t in tasks.items()})
        first = next(iter(tasks.values()))
        main_key = first.spec.metric_key(
            first.spec.main_metric, datamodule.per_task[first.spec.name].split_names_val[0]
        )
        summary = run.summary(
            FinetuneSummary,
            model=parts.resolved.model_name,
            objective=parts.resolved.objective,
            adaptation="multitask",
            task="+".join(tasks),
            tasks=list(tasks),
            backbone_source=parts.resolved.source,
            **backbone_summary(parts.resolved),
            config_hash=config_hash(OmegaConf.to_container(cfg, resolve=True)),
            sampling=str(stage.sampling),
            temperature=parts.temperature if parts.temperature != float("inf") else None,
            sampling_probabilities=parts.sampler.probabilities,
            train_sizes=parts.sizes,
            task_steps=dict(module.task_steps),
            task_metrics=task_metrics,
            # each task's main metric on its first eval split: the leaderboard's score for its cell
            task_main_metrics={
                name: t.spec.metric_key(t.spec.main_metric, datamodule.per_task[name].split_names_val[0])
                for name, t in tasks.items()
            },
            metrics=task_metrics[first.spec.name],
            main_metric=main_key,
            main_score=task_metrics[first.spec.name].get(main_key),
            # each classification task's confusion and majority-class baseline; the first task's also
            # as the run's own (its main score is the run's)
            **({"task_confusion": confusions} if confusions else {}),
            **({"task_baselines": baselines} if baselines else {}),
            **({"confusion": confusions[first.spec.name]} if first.spec.name in confusions else {}),
            **(
                {"baseline": {**baselines[first.spec.name], "metric": main_key}} if first.spec.name in baselines else {}
            ),
            **training_numbers(model, module, trainer),
            task_model_dir=task_model_dir,
        )
        run.write_summary(summary)
    return summary.model_dump(mode="json", exclude_unset=True)

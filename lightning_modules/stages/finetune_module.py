"""The LightningModule that trains a task model (heads/task_model.py) under an adaptation mode."""

from __future__ import annotations

import time

import lightning.pytorch as pl
import torch

from lightning_modules.adaptation.adversarial import AdversarialTraining
from lightning_modules.adaptation.base import Adaptation
from lightning_modules.heads.evaluation import prediction_scores, split_metrics, task_loss
from lightning_modules.heads.generation_model import continuations
from lightning_modules.heads.task_model import TaskModel
from lightning_modules.optim import build_optimizer, build_scheduler
from lightning_modules.stages.pretrain_module import log_this_step, training_flops_per_token
from lightning_modules.tasks.encoding import in_split_order
from lightning_modules.tasks.span_answers import SpanWindows
from lightning_modules.tasks.tagged_predictions import first_subword_predictions
from ptmlab.contracts.decoding import DecodingSettings


class FinetuneModule(pl.LightningModule):
    def __init__(
        self,
        model: TaskModel,
        adaptation: Adaptation,
        task,
        optimizer_cfg,
        scheduler_cfg,
        lr: float,
        total_steps: int,
        val_split_names: list[str],
        adversarial: AdversarialTraining | None = None,
    ):
        super().__init__()
        self.model = model
        self.adaptation = adaptation
        self.adversarial = adversarial  # embedding-space adversarial training (adaptation/adversarial.py)
        self.task = task
        self.optimizer_cfg, self.scheduler_cfg = optimizer_cfg, scheduler_cfg
        self.lr, self.total_steps = lr, total_steps
        self.val_split_names = val_split_names
        self.is_regression = task.spec.is_regression
        self._outputs: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self.last_metrics: dict[str, float] = {}
        self.train_time_s = 0.0
        self._fit_started = None
        self._flops_cache: dict[int, float] = {}
        # Generation: the Hugging Face twin validation decodes with (made per validation epoch)
        self._generator = None
        self._decoding = DecodingSettings.from_dict(task.spec.generation) if task.spec.is_generation else None

    def training_flops_per_token(self, seq_len: int) -> float:
        """Kaplan et al.'s 6·N + 6·L·T·H per token of the backbone at this batch's padded length
        (the head is negligible). It counts a full backward pass: for adaptation modes that freeze
        most of the backbone it overstates the work done, so their MFU reads high."""
        if seq_len not in self._flops_cache:
            self._flops_cache[seq_len] = training_flops_per_token(self.model.backbone, seq_len)
        return self._flops_cache[seq_len]

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return task_loss(self.task.spec, logits, labels)

    def on_fit_start(self) -> None:
        self._fit_started = time.perf_counter()

    def on_fit_end(self) -> None:
        if self._fit_started is not None:
            self.train_time_s = time.perf_counter() - self._fit_started
        if self.adversarial is not None:
            self.adversarial.detach()  # predictions and the export see the plain model

    def on_train_batch_start(self, batch, batch_idx) -> None:
        self.adaptation.on_train_step(self.model, self.global_step, self.total_steps)

    def training_step(self, batch, batch_idx):
        size = len(batch["labels"])
        if self.adversarial is None:
            loss = logged = self._loss(self.model(batch), batch["labels"])
        else:
            loss, logged = self.adversarial.step_loss(
                self.model,
                batch,
                self._loss,
                self._backward_within_step,
                loss_scale=1.0 if self.adversarial.accumulates else self._loss_scale(),
            )
        reg = self.adaptation.regularization(self.model)
        if torch.is_tensor(reg):
            self.log("train/regularization", reg.detach(), batch_size=size)
            loss, logged = loss + reg, logged + reg.detach()
        self.log("train/loss", logged, prog_bar=True, batch_size=size)
        return loss

    def _backward_within_step(self, loss: torch.Tensor) -> None:
        """A backward pass of part of this step's loss, done as Lightning's closure does the returned
        loss's: divided by the gradient accumulation, scaled under mixed precision, hooks run. The
        optimizer step, unscaling and clipping stay Lightning's, after the closure."""
        with torch.autocast(self.device.type, enabled=False):  # backward passes run outside autocast
            self.trainer.strategy.backward(loss / self.trainer.accumulate_grad_batches, None)

    def _loss_scale(self) -> float:
        """The mixed-precision scaler's scale (1 without one): PGD's δ-only gradients are taken of the
        loss times it, as Lightning's backward would scale it (a host sync: PGD only)."""
        scaler = getattr(self.trainer.precision_plugin, "scaler", None) if self._trainer is not None else None
        return float(scaler.get_scale()) if scaler is not None and scaler.is_enabled() else 1.0

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        # Straight to the logger on logging steps (`self.log` of a number copies it to the device
        # every step).
        if log_this_step(self.trainer):
            self.trainer.logger.log_metrics(
                {"train/lr": self.trainer.optimizers[0].param_groups[-1]["lr"]}, step=int(self.trainer.global_step)
            )

    # -- evaluation: gather every prediction of a split, then the task's exact metrics ---------
    def on_validation_epoch_start(self) -> None:
        self._outputs = {}

    def _token_predictions(self, batch) -> torch.Tensor:
        """B×L first-sub-word tag indices (tasks/tagged_predictions.py): rows of one length, so
        batches of different lengths concatenate."""
        return first_subword_predictions(self.model(batch), batch, self.task.spec.max_length)

    def _generated_texts(self, batch) -> tuple[torch.Tensor, list[str]]:
        """(example indices, output texts) of a batch, decoded on the Hugging Face twin made at the
        epoch's start with the task's decoding settings (heads/generation_model.py)."""
        encoder = self.trainer.datamodule.encoder
        rows = continuations(encoder, encoder.generate(self._generator, batch, self._decoding).tolist())
        texts = encoder.tokenizer.batch_decode(rows, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return batch["example_index"].cpu(), [t.strip() for t in texts]

    def validation_step(self, batch, batch_idx, dataloader_idx: int = 0):
        if self.task.spec.is_span_level:  # every window's logits; answers per question in split_metrics
            self._outputs.setdefault(dataloader_idx, []).append(
                SpanWindows.from_batch(self.model(batch), batch, self.task.spec.max_length)
            )
            return
        if self.task.spec.is_generation:
            if self._generator is None:
                self._generator = self.model.hf_generator()  # the weights as they are now
            self._outputs.setdefault(dataloader_idx, []).append(self._generated_texts(batch))
            return
        index = batch["example_index"].cpu()  # the loader reads longest first: rows go back to split order
        if self.task.spec.is_token_level:  # scored against the split's word-level gold (split_metrics)
            preds = self._token_predictions(batch)
            self._outputs.setdefault(dataloader_idx, []).append((index, preds, torch.zeros(len(preds))))
            return
        preds = prediction_scores(self.task.spec, self.model(batch))
        self._outputs.setdefault(dataloader_idx, []).append((index, preds.cpu(), batch["labels"].cpu()))

    def on_validation_epoch_end(self) -> None:
        task_name = self.task.spec.name
        metrics: dict[str, float] = {}
        self._generator = None
        for idx, outputs in self._outputs.items():
            split = self.val_split_names[idx]
            if self.task.spec.is_span_level:
                metrics.update(split_metrics(self.task, split, SpanWindows.cat(outputs), None))
                continue
            if self.task.spec.is_generation:  # texts back in split order
                order = torch.cat([i for i, _ in outputs]).argsort().tolist()
                texts = [t for _, batch_texts in outputs for t in batch_texts]
                metrics.update(split_metrics(self.task, split, [texts[i] for i in order], None))
                continue
            preds = in_split_order([(i, p) for i, p, _ in outputs])
            labels = in_split_order([(i, y) for i, _, y in outputs])
            metrics.update(split_metrics(self.task, split, preds, labels))
        for key, value in metrics.items():
            self.log(f"val/{task_name}/{key}", value)
        self.last_metrics = metrics

    def predict_step(self, batch, batch_idx, dataloader_idx: int = 0):
        """A span task's windows (SpanWindows, split order); otherwise (example indices, rows):
        the loader reads longest first, and finetune.py puts rows back with `in_split_order`."""
        if self.task.spec.is_span_level:
            return SpanWindows.from_batch(self.model(batch), batch, self.task.spec.max_length)
        index = batch["example_index"].cpu()
        if self.task.spec.is_token_level:
            return index, self._token_predictions(batch).cpu()
        logits = self.model(batch).detach().float().cpu()
        if self.task.spec.is_multiple_choice:  # every choice's score: the prediction file holds them all
            return index, logits
        # classification: the logits (the confusion report reads their probabilities), argmax taken by the writer
        return index, logits.squeeze(-1) if self.is_regression else logits

    def configure_optimizers(self):
        weight_decay = float(self.optimizer_cfg.get("weight_decay", 0.0))
        groups = self.adaptation.param_groups(self.model, self.lr, weight_decay)
        optimizer = build_optimizer(groups, self.optimizer_cfg, self._trainer)
        scheduler = build_scheduler(optimizer, self.scheduler_cfg, self.total_steps)
        return optimizer if scheduler is None else {"optimizer": optimizer, "lr_scheduler": scheduler}

"""The downstream model (backbone → pooled representation → task head) and its LightningModule."""

from __future__ import annotations

import time

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.adaptation.base import Adaptation
from lightning_modules.adaptation.feature import ScalarMix
from lightning_modules.stages.optim import build_optimizer, build_scheduler
from lightning_modules.tasks.metrics import compute_metrics
from ptmlab.errors import ConfigError

POOLINGS = ("pool_index", "mean")


class TaskModel(nn.Module):
    """pool_index: the representation at batch["pool_index"] ([CLS] for encoders, GPT's extract
    token for causal decoders); mean: the mask-weighted mean over tokens."""

    def __init__(self, backbone: nn.Module, num_labels: int, pooling: str = "pool_index",
                 head_dropout: float = 0.1, scalar_mix: bool = False):
        super().__init__()
        if pooling not in POOLINGS:
            raise ConfigError(f"stage.pooling={pooling} is unknown; valid: {', '.join(POOLINGS)}")
        self.backbone = backbone
        self.pooling = pooling
        self.scalar_mix = ScalarMix(backbone.num_layers + 1) if scalar_mix else None
        self.head = nn.Sequential(nn.Dropout(head_dropout), nn.Linear(backbone.hidden_size, num_labels))
        self.freeze_backbone_mode = False  # feature-based: keep the frozen backbone in eval mode

    def train(self, mode: bool = True):
        super().train(mode)
        if self.freeze_backbone_mode:
            self.backbone.eval()
        return self

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = self.backbone(batch["input_ids"], attention_mask=batch["attention_mask"],
                            token_type_ids=batch.get("token_type_ids"))
        states = self.scalar_mix(out.hidden_states) if self.scalar_mix is not None else out.last_hidden_state
        if self.pooling == "mean":
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)  # B×T -> B×T×1
            pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # B×H
        else:
            index = batch["pool_index"].view(-1, 1, 1).expand(-1, 1, states.size(-1))  # B -> B×1×H
            pooled = states.gather(1, index).squeeze(1)  # B×H
        return self.head(pooled)  # B×C (C=1 for regression)


class FinetuneModule(pl.LightningModule):
    def __init__(self, model: TaskModel, adaptation: Adaptation, task, optimizer_cfg, scheduler_cfg,
                 lr: float, total_steps: int, val_split_names: list[str]):
        super().__init__()
        self.model = model
        self.adaptation = adaptation
        self.task = task
        self.optimizer_cfg, self.scheduler_cfg = optimizer_cfg, scheduler_cfg
        self.lr, self.total_steps = lr, total_steps
        self.val_split_names = val_split_names
        self.is_regression = task.spec.is_regression
        self._outputs: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self.last_metrics: dict[str, float] = {}
        self.train_time_s = 0.0
        self._fit_started = None

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.is_regression:
            return F.mse_loss(logits.squeeze(-1).float(), labels.float())
        return F.cross_entropy(logits.float(), labels)

    def on_fit_start(self) -> None:
        self._fit_started = time.perf_counter()

    def on_fit_end(self) -> None:
        if self._fit_started is not None:
            self.train_time_s = time.perf_counter() - self._fit_started

    def on_train_batch_start(self, batch, batch_idx) -> None:
        self.adaptation.on_train_step(self.model, self.global_step, self.total_steps)

    def training_step(self, batch, batch_idx):
        logits = self.model(batch)
        loss = self._loss(logits, batch["labels"])
        reg = self.adaptation.regularization(self.model)
        if torch.is_tensor(reg):
            self.log("train/regularization", reg.detach(), batch_size=len(logits))
            loss = loss + reg
        self.log("train/loss", loss, prog_bar=True, batch_size=len(logits))
        self.log("train/lr", self.trainer.optimizers[0].param_groups[-1]["lr"], batch_size=len(logits))
        return loss

    # -- evaluation: gather every prediction of a split, then the task's exact metrics ---------
    def on_validation_epoch_start(self) -> None:
        self._outputs = {}

    def validation_step(self, batch, batch_idx, dataloader_idx: int = 0):
        logits = self.model(batch).detach().float()
        preds = logits.squeeze(-1) if self.is_regression else logits
        self._outputs.setdefault(dataloader_idx, []).append((preds.cpu(), batch["labels"].cpu()))

    def on_validation_epoch_end(self) -> None:
        task_name = self.task.spec.name
        metrics: dict[str, float] = {}
        for idx, outputs in self._outputs.items():
            split = self.val_split_names[idx]
            preds = torch.cat([p for p, _ in outputs])
            labels = torch.cat([y for _, y in outputs])
            for name, value in compute_metrics(self.task.spec.metrics, preds, labels,
                                               num_labels=self.task.num_labels).items():
                metrics[self.task.spec.metric_key(name, split)] = float(value)
        for key, value in metrics.items():
            self.log(f"val/{task_name}/{key}", value)
        self.last_metrics = metrics

    def predict_step(self, batch, batch_idx, dataloader_idx: int = 0):
        logits = self.model(batch).detach().float()
        return logits.squeeze(-1) if self.is_regression else logits.argmax(-1)

    def configure_optimizers(self):
        weight_decay = float(self.optimizer_cfg.get("weight_decay", 0.0))
        groups = self.adaptation.param_groups(self.model, self.lr, weight_decay)
        optimizer = build_optimizer(groups, self.optimizer_cfg)
        scheduler = build_scheduler(optimizer, self.scheduler_cfg, self.total_steps)
        return optimizer if scheduler is None else {"optimizer": optimizer, "lr_scheduler": scheduler}

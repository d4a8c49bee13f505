"""The pre-training LightningModule: a backbone and one or more weighted objectives."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
from omegaconf import DictConfig
from torch import nn

from lightning_modules.optim import build_optimizer, build_scheduler, decay_param_groups
from lightning_modules.runtime.throughput import weights_digest


def log_this_step(trainer) -> bool:
    """True on the optimizer steps whose metrics go to the logger (every `log_every_n_steps`)."""
    return (
        trainer.logger is not None
        and trainer.global_step > 0
        and trainer.global_step % max(int(trainer.log_every_n_steps or 1), 1) == 0
        and not trainer.fit_loop._should_accumulate()
    )


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def training_flops_per_token(backbone: nn.Module, seq_len: int) -> float:
    """Kaplan et al. (2020) estimate: forward ≈ 2·N + 2·L·T·H FLOPs per token (N non-embedding
    parameters, L layers, T context, H width; the second term is attention's QK^T and AV), and
    a training step ≈ 3× forward, so 6·N + 6·L·T·H per token."""
    emb = backbone.get_input_embeddings()
    n_embedding = sum(p.numel() for p in emb.parameters()) if emb is not None else 0
    n = count_parameters(backbone) - n_embedding
    # Without attention (an LSTM) the cost is all in the weights (6·N).
    attention = 6.0 * backbone.num_layers * seq_len * backbone.hidden_size if backbone.has_attention else 0.0
    return 6.0 * n + attention


def objectives_flops_per_token(backbone: nn.Module, objectives: dict[str, nn.Module], seq_len: int) -> float:
    """Training FLOPs per input token for the whole step: each objective runs the backbone
    `backbone_passes` times (1 by default; NSP and MLM each run their own forward, contrastive
    learning runs two), or gives its own estimate from the backbone's via
    `training_flops_per_token(backbone_flops_per_token, seq_len)` (ELECTRA adds its generator's
    attention, InfoWord its short n-gram pass)."""
    base = training_flops_per_token(backbone, seq_len)
    total = 0.0
    for objective in objectives.values():
        total += objective.training_flops_per_token(base, seq_len)
    return total or base


class PretrainModule(pl.LightningModule):
    def __init__(
        self,
        backbone: nn.Module,
        objectives: dict[str, nn.Module],
        weights: dict[str, float],
        optimizer_cfg: DictConfig,
        scheduler_cfg: DictConfig | None,
        total_steps: int,
        seq_len: int,
    ):
        super().__init__()
        self.backbone = backbone
        self.objectives = nn.ModuleDict(objectives)
        self.weights = dict(weights)
        self.optimizer_cfg, self.scheduler_cfg = optimizer_cfg, scheduler_cfg
        self.total_steps = total_steps
        self.flops_per_token = objectives_flops_per_token(backbone, objectives, seq_len)
        # This rank's non-padding tokens, kept on the device: reading it every step would make the
        # host wait for the GPU (saved in checkpoints).
        self._tokens: torch.Tensor | int = 0
        self._last_loss: torch.Tensor | None = None
        self.total_tokens_seen = 0  # every rank's, summed once training ends
        self.replica_digests: list[str] = []  # weights digest of each DDP replica, at the end
        self._val_sums: dict[str, list[float]] = {}

    @property
    def tokens_seen(self) -> int:
        return int(self._tokens)

    @property
    def last_train_loss(self) -> float | None:
        """The last training step's loss; None before any step (JSON and PostgreSQL have no NaN)."""
        return float(self._last_loss) if self._last_loss is not None else None

    def training_flops_per_token(self, seq_len: int) -> float:
        """For the throughput monitor: blocks are packed or padded to the configured length."""
        return self.flops_per_token

    # -- one step ---------------------------------------------------------------------------
    def _compute(self, batch: dict[str, torch.Tensor]):
        total = 0.0
        parts = {}
        for name, objective in self.objectives.items():
            out = objective(batch, self.backbone)
            total = total + self.weights.get(name, 1.0) * out.loss
            parts[name] = out
        return total, parts

    def training_step(self, batch, batch_idx):
        loss, parts = self._compute(batch)
        batch_size = batch["input_ids"].shape[0]
        self.log("train/loss", loss, prog_bar=True, batch_size=batch_size)
        for name, out in parts.items():
            if len(parts) > 1:
                self.log(f"train/{name}/loss", out.loss.detach(), batch_size=batch_size)
            for key, value in out.metrics.items():
                self.log(f"train/{name}/{key}", value, batch_size=batch_size)
        self._tokens = self._tokens + batch["attention_mask"].sum()
        self._last_loss = loss.detach()
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        # Straight to the logger, on logging steps only: `self.log` of a Python number copies it
        # to the device every step, which makes the host wait for the GPU.
        if log_this_step(self.trainer):
            tokens = self.tokens_seen
            self.trainer.logger.log_metrics(
                {
                    "train/lr": self.trainer.optimizers[0].param_groups[0]["lr"],
                    "train/tokens_seen": float(tokens),
                    "train/flops": tokens * self.flops_per_token,
                },
                step=int(self.trainer.global_step),
            )

    def on_train_end(self) -> None:
        """Every rank's token count summed; each replica's weights digest gathered (DDP keeps
        replicas identical: the stage records the digests so a divergence is visible)."""
        from lightning.pytorch.strategies import DDPStrategy

        strategy = self.trainer.strategy
        if self.trainer.world_size > 1:
            total = strategy.reduce(
                torch.tensor(float(self.tokens_seen), dtype=torch.float64, device=strategy.root_device), reduce_op="sum"
            )
            self.total_tokens_seen = int(total.item())
        else:
            self.total_tokens_seen = self.tokens_seen
        if self.trainer.world_size == 1 or isinstance(strategy, DDPStrategy):  # FSDP shards: no replicas
            digest = torch.tensor([weights_digest(self.backbone)], dtype=torch.int64, device=strategy.root_device)
            gathered = strategy.all_gather(digest) if self.trainer.world_size > 1 else digest
            self.replica_digests = [f"{int(d):016x}" for d in gathered.reshape(-1).tolist()]

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["ptmlab_tokens_seen"] = self.tokens_seen
        checkpoint["ptmlab_last_train_loss"] = self.last_train_loss

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self._tokens = int(checkpoint.get("ptmlab_tokens_seen", 0))
        # A rerun resumed from the final checkpoint trains no step: its summary reports the loss
        # the checkpoint was saved at, not none.
        loss = checkpoint.get("ptmlab_last_train_loss")
        self._last_loss = torch.tensor(loss) if loss is not None else None

    # -- validation ---------------------------------------------------------------------------
    def on_validation_epoch_start(self) -> None:
        self._val_sums = {}

    def validation_step(self, batch, batch_idx):
        loss, parts = self._compute(batch)
        self._accumulate("__total__", float(loss), 1)
        for name, out in parts.items():
            n = int(out.num_predicted_tokens or 0)  # a count kept on the device in training
            self._accumulate(name, float(out.loss), n if n else 1)
            for key, value in out.metrics.items():
                self._accumulate(f"{name}/{key}", float(value), 1)

    def _accumulate(self, key: str, value: float, weight: int) -> None:
        acc = self._val_sums.setdefault(key, [0.0, 0])
        acc[0] += value * weight
        acc[1] += weight

    def on_validation_epoch_end(self) -> None:
        # each rank saw part of the validation set: sum the parts (a module driven without a
        # Trainer, as the objective contract tests do, is one process)
        if self._trainer is not None and self.trainer.world_size > 1:
            keys = sorted(self._val_sums)
            local = torch.tensor(
                [v for k in keys for v in self._val_sums[k]],
                dtype=torch.float64,
                device=self.trainer.strategy.root_device,
            )
            summed = self.trainer.strategy.reduce(local, reduce_op="sum").cpu().tolist()
            self._val_sums = {k: [summed[2 * i], summed[2 * i + 1]] for i, k in enumerate(keys)}
        means = {k: s / max(n, 1) for k, (s, n) in self._val_sums.items()}
        if "__total__" not in means:
            return
        self.log("val/loss", means.pop("__total__"), prog_bar=True)
        perplexity_logged = False
        for key, value in means.items():
            self.log(f"val/{key}" if "/" in key else f"val/{key}/loss", value)
            if "/" not in key and self._predicts_tokens(key):
                ppl = math.exp(min(value, 50.0))  # token-weighted mean NLL -> perplexity
                self.log(f"val/{key}/perplexity", ppl)
                if not perplexity_logged:
                    self.log("val/perplexity", ppl, prog_bar=True)
                    perplexity_logged = True

    def _predicts_tokens(self, name: str) -> bool:
        return self.objectives[name].predicts_tokens

    # -- optimisation ---------------------------------------------------------------------------
    def configure_optimizers(self):
        weight_decay = float(self.optimizer_cfg.get("weight_decay", 0.0))
        optimizer = build_optimizer(
            decay_param_groups(self.named_parameters(), weight_decay), self.optimizer_cfg, self._trainer
        )
        scheduler = build_scheduler(optimizer, self.scheduler_cfg, self.total_steps)
        if scheduler is None:
            return optimizer
        return {"optimizer": optimizer, "lr_scheduler": scheduler}

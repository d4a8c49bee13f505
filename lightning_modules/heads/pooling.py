"""From a backbone's hidden states to one vector per sequence: what every task head reads.

`PooledEncoder` is a backbone plus its pooling (and, for feature-based adaptation, an ELMo-style
scalar mix of all layers in place of the top layer). The single-task model
(`task_model.TaskModel`, one `head`) and the multi-task model (`multitask_model.MultiTaskModel`,
one head per task in `heads`) subclass it, so pooling is written once. Both give
`logits(batch) -> {task name: B×C}` for every head; C=1 for regression.

    pool_index   the representation at batch["pool_index"]: [CLS] (position 0) for encoders,
                 GPT's <extract> token for causal decoders (see tasks/encoding.py)
    mean         the attention-mask-weighted mean over tokens
    tokens       no pooling: every position's state (B×T×H), for a per-token head (token
                 classification); inputs are then encoded word by word (tasks/token_encoding.py)
    spans        no pooling either, for the start/end head of extractive QA; inputs are then
                 question + context windows (tasks/span_encoding.py)
"""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.adaptation.feature import ScalarMix
from lightning_modules.tasks.encoding import PairEncoder
from lightning_modules.tasks.span_encoding import QuestionContextEncoder
from lightning_modules.tasks.token_encoding import WordTokenEncoder
from ptmlab.contracts import ConfigError

POOLINGS = ("pool_index", "mean", "tokens", "spans")


def check_pooling(pooling: str) -> str:
    if pooling not in POOLINGS:
        raise ConfigError(f"stage.pooling={pooling} is unknown; valid: {', '.join(POOLINGS)}")
    return pooling


def pool(states: torch.Tensor, batch: dict[str, torch.Tensor], pooling: str) -> torch.Tensor:
    """B×T×H hidden states -> B×H (B×T×H unchanged for `tokens` and `spans`)."""
    if pooling in ("tokens", "spans"):
        return states
    if pooling == "mean":
        mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)  # B×T -> B×T×1
        return (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # B×H
    index = batch["pool_index"].view(-1, 1, 1).expand(-1, 1, states.size(-1))  # B -> B×1×H
    return states.gather(1, index).squeeze(1)  # B×H


def linear_head(hidden_size: int, num_labels: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden_size, num_labels))


class PooledEncoder(nn.Module):
    """A backbone and its pooling. Attribute names (`backbone`, `scalar_mix`) are the state-dict
    prefixes of checkpoints and task-model exports: keep them."""

    def __init__(self, backbone: nn.Module, pooling: str = "pool_index", scalar_mix: bool = False):
        super().__init__()
        self.backbone = backbone
        self.pooling = check_pooling(pooling)
        self.scalar_mix = ScalarMix(backbone.num_layers + 1) if scalar_mix else None
        self.freeze_backbone_mode = False  # feature-based: keep the frozen backbone in eval mode
        # Prompt-based fine-tuning sets a template (tasks/templates.py): inputs are encoded through
        # it and the head reads the mask slot. None: the plain (pair) encoding.
        self.input_template = None

    def input_encoder(self, tokenizer, max_length: int, *, doc_stride: int | None = None):
        """How this model's inputs are encoded (tasks/encoding.py): every path that feeds it text
        (training, evaluation, a loaded task model) asks here. `doc_stride`: the overlap of a span
        model's context windows (task.doc_stride; other poolings ignore it)."""
        if self.pooling == "spans":
            return QuestionContextEncoder(
                tokenizer, max_length=max_length, doc_stride=max_length // 4 if doc_stride is None else doc_stride
            )
        if self.pooling == "tokens":
            return WordTokenEncoder(tokenizer, max_length=max_length)
        if self.input_template is not None:
            return self.input_template.encoder(tokenizer, causal=bool(self.backbone.is_causal), max_length=max_length)

        return PairEncoder(tokenizer, causal=bool(self.backbone.is_causal), max_length=max_length)

    def train(self, mode: bool = True):
        super().train(mode)
        if self.freeze_backbone_mode:
            self.backbone.eval()
        return self

    def pooled(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = self.backbone(
            batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch.get("token_type_ids")
        )
        states = self.scalar_mix(out.hidden_states) if self.scalar_mix is not None else out.last_hidden_state
        return pool(states, batch, self.pooling)

    @property
    def head_sizes(self) -> dict[str, int]:  # pragma: no cover - abstract
        """Task name -> output size of its head."""
        raise NotImplementedError

    def task_logits(self, task: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:  # pragma: no cover
        """B×C logits of the head of `task`."""
        raise NotImplementedError

    def logits(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:  # pragma: no cover
        """Task name -> B×C logits, every head, one backbone pass."""
        raise NotImplementedError


class SingleHeadModel(PooledEncoder):
    """A model with one head (`self.task_name`: the task it was trained for, None: any task asked
    for); its forward gives that head's logits."""

    task_name: str | None = None

    def task_logits(self, task: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.task_name is not None and task != self.task_name:
            raise ConfigError(f"this model's head is for task {self.task_name}, not {task}")
        return self(batch)

    def logits(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {self.task_name or "task": self(batch)}

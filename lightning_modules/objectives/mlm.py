"""Masked language modelling (Devlin et al. 2019): predict the original token at positions
corrupted by `mask_tokens` (dynamic masking: a fresh draw every time a batch is seen).

Variants subclass `MaskedLMObjective` and override one hook: `select_positions` (whole-word or
span masking), `corrupt` (static masking read from the batch), or `forward` (an extra head).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.models.transformer import build_activation
from lightning_modules.objectives.base import Objective, ObjectiveOutput, predicted_token_loss
from lightning_modules.objectives.masking import replace_selected, replacement_pool, select_tokens
from lightning_modules.objectives.seeding import SeededCorruption
from ptmlab.contracts import ConfigError
from ptmlab.methods.objectives import MaskedLMParams


class MaskedLMHead(nn.Module):
    """BERT's prediction head: dense -> activation -> LayerNorm -> decoder whose weight is the
    backbone's input embedding matrix (tied, read at call time) plus its own bias. The dense
    maps to the embedding width, so factorised embeddings (E ≠ H) work unchanged."""

    def __init__(
        self,
        hidden_size: int,
        embedding_size: int,
        vocab_size: int,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
    ):
        super().__init__()
        self.dense = nn.Linear(hidden_size, embedding_size)
        self.activation = build_activation(activation)
        self.layer_norm = nn.LayerNorm(embedding_size, eps=layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        nn.init.normal_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)

    def forward(self, hidden: torch.Tensor, embedding_weight: torch.Tensor) -> torch.Tensor:
        x = self.layer_norm(self.activation(self.dense(hidden)))
        return F.linear(x, embedding_weight, self.bias)  # N×E -> N×V


def special_tokens_mask_for(
    input_ids: torch.Tensor, special_ids: torch.Tensor, attention_mask: torch.Tensor | None
) -> torch.Tensor:
    """B×T bool, True at special tokens and padding (positions never to be selected)."""
    mask = torch.isin(input_ids, special_ids)
    if attention_mask is not None:
        mask = mask | ~attention_mask.bool()
    return mask


class MaskedLMObjective(Objective):
    declaration = MaskedLMParams

    name = "mlm"

    def __init__(self, backbone: nn.Module, tokenizer, params: MaskedLMParams | None = None, **values: Any):
        super().__init__()
        self.params = params = self.declared_params(params, values)
        if backbone.is_causal:
            raise ConfigError(
                f"objective=mlm needs a bidirectional backbone; model family "
                f"{backbone.family!r} is causal (is_causal=True)"
            )
        if tokenizer.mask_token_id is None:
            raise ConfigError("objective=mlm needs a tokenizer with a mask token; tokenizer.mask_token_id is None")
        self.mask_prob, self.mask_token_prob = params.mask_prob, params.mask_token_prob
        self.random_token_prob = params.random_token_prob
        self.mask_token_id = int(tokenizer.mask_token_id)
        embeddings = backbone.get_input_embeddings()
        vocab_size, embedding_size = embeddings.weight.shape
        special = sorted({int(i) for i in tokenizer.all_special_ids})
        self.register_buffer("special_ids", torch.tensor(special, dtype=torch.long), persistent=False)
        self.register_buffer("replacement_ids", replacement_pool(vocab_size, special), persistent=False)
        self.corruption = SeededCorruption(params.seed)
        self.head = MaskedLMHead(
            backbone.hidden_size,
            embedding_size,
            vocab_size,
            activation=backbone.activation,
            layer_norm_eps=backbone.layer_norm_eps,
        )

    # -- hooks for variants -----------------------------------------------------------------
    def select_positions(
        self, batch: dict[str, torch.Tensor], special_tokens_mask: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """B×T bool of positions to predict. Whole-word / span masking override this."""
        return select_tokens(special_tokens_mask, self.mask_prob, generator)

    def corrupt(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(corrupted input_ids, labels) for this batch."""
        input_ids = batch["input_ids"]
        special = special_tokens_mask_for(input_ids, self.special_ids, batch.get("attention_mask"))
        if "special_tokens_mask" in batch:
            special = special | batch["special_tokens_mask"].bool()
        generator = self.corruption.generator(input_ids.device)
        selected = self.select_positions(batch, special, generator)
        return replace_selected(
            input_ids,
            selected,
            self.mask_token_id,
            self.replacement_ids,
            generator,
            self.mask_token_prob,
            self.random_token_prob,
        )

    # -- the step -------------------------------------------------------------------------------
    def forward(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> ObjectiveOutput:
        corrupted, labels = self.corrupt(batch)
        out = backbone(
            corrupted, attention_mask=batch.get("attention_mask"), token_type_ids=batch.get("token_type_ids")
        )
        embedding_weight = backbone.get_input_embeddings().weight
        loss, accuracy, num_predicted = predicted_token_loss(
            out.last_hidden_state, labels, lambda hidden: self.head(hidden, embedding_weight)
        )
        return ObjectiveOutput(loss=loss, metrics={"mlm_acc": accuracy}, num_predicted_tokens=num_predicted)

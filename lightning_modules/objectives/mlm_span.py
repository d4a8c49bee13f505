"""SpanBERT (Joshi et al. 2020): mask contiguous spans of whole words (lengths ~ Geometric(0.2)
renormalised to 1..10, mean 3.8) instead of single tokens, and optionally add the span-boundary
objective (SBO): predict each masked token from the two tokens just outside its span and its
position in the span, y_i = f(x_{s-1}, x_{e+1}, p_{i-s+1}), f = 2-layer GeLU MLP with LayerNorm,
decoded with the same tied output embeddings. Loss = MLM + sbo_weight · SBO."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.objectives.base import ObjectiveOutput, token_loss
from lightning_modules.objectives.corruption.word_spans import span_boundaries, span_select, word_start_table
from lightning_modules.objectives.masking import IGNORE_INDEX
from lightning_modules.objectives.mlm import MaskedLMObjective
from ptmlab.methods.objectives import SpanMaskedLMParams


class SpanBoundaryHead(nn.Module):
    def __init__(
        self,
        hidden_size: int,
        embedding_size: int,
        vocab_size: int,
        max_span_positions: int,
        position_size: int = 200,
        layer_norm_eps: float = 1e-12,
    ):
        super().__init__()
        self.position_embeddings = nn.Embedding(max_span_positions, position_size)
        self.mlp = nn.Sequential(
            nn.Linear(2 * hidden_size + position_size, hidden_size),
            nn.GELU(),
            nn.LayerNorm(hidden_size, eps=layer_norm_eps),
            nn.Linear(hidden_size, embedding_size),
            nn.GELU(),
            nn.LayerNorm(embedding_size, eps=layer_norm_eps),
        )
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.max_span_positions = max_span_positions

    def forward(
        self, left: torch.Tensor, right: torch.Tensor, offset: torch.Tensor, embedding_weight: torch.Tensor
    ) -> torch.Tensor:
        position = self.position_embeddings(offset.clamp(0, self.max_span_positions - 1))
        x = self.mlp(torch.cat([left, right, position], dim=-1))  # N×(2H+P) -> N×E
        return F.linear(x, embedding_weight, self.bias)  # N×V


class SpanMaskedLMObjective(MaskedLMObjective):
    declaration = SpanMaskedLMParams

    name = "mlm_span"

    def __init__(self, backbone, tokenizer, params: SpanMaskedLMParams | None = None, **values: Any):
        super().__init__(backbone, tokenizer, params, **values)
        params = self.params
        self.geometric_p, self.max_span_length = params.geometric_p, params.max_span_length
        self.whole_words = params.whole_words
        self.sbo_weight = float(params.sbo_weight)
        self.register_buffer("word_start_ids", word_start_table(tokenizer), persistent=False)
        embedding_size = backbone.get_input_embeddings().weight.shape[1]
        # Adjacent spans merge, so a run can be longer than one span: room for several.
        self.boundary_head = (
            SpanBoundaryHead(
                backbone.hidden_size,
                embedding_size,
                self.head.bias.numel(),
                max_span_positions=4 * self.max_span_length,
            )
            if params.span_boundary_objective
            else None
        )

    def select_positions(self, batch, special_tokens_mask, generator):
        word_start = None
        if self.whole_words:
            table = self.word_start_ids
            word_start = table[batch["input_ids"].clamp(max=table.numel() - 1)]
        return span_select(
            special_tokens_mask, self.mask_prob, generator, self.geometric_p, self.max_span_length, word_start
        )

    def forward(self, batch, backbone) -> ObjectiveOutput:
        corrupted, labels = self.corrupt(batch)
        out = backbone(
            corrupted, attention_mask=batch.get("attention_mask"), token_type_ids=batch.get("token_type_ids")
        )
        hidden_all = out.last_hidden_state
        predicted = labels != IGNORE_INDEX
        num_predicted = int(predicted.sum())
        embedding_weight = backbone.get_input_embeddings().weight
        logits = self.head(hidden_all[predicted], embedding_weight)  # B×T×H -> N×H -> N×V
        targets = labels[predicted]
        mlm_loss, mlm_acc = token_loss(logits, targets, hidden_all)
        if num_predicted == 0:
            return ObjectiveOutput(loss=mlm_loss, metrics={"mlm_acc": mlm_acc}, num_predicted_tokens=0)
        metrics = {"mlm_acc": mlm_acc, "mlm_loss": mlm_loss.detach()}
        loss = mlm_loss
        if self.boundary_head is not None:
            left, right, offset = span_boundaries(predicted)
            rows = torch.arange(hidden_all.shape[0], device=hidden_all.device)[:, None].expand_as(left)
            left_h = hidden_all[rows[predicted], left[predicted]]  # N×H
            right_h = hidden_all[rows[predicted], right[predicted]]  # N×H
            sbo_logits = self.boundary_head(left_h, right_h, offset[predicted], embedding_weight)
            sbo_loss, metrics["sbo_acc"] = token_loss(sbo_logits, targets)
            loss = loss + self.sbo_weight * sbo_loss
            metrics["sbo_loss"] = sbo_loss.detach()
        return ObjectiveOutput(loss=loss, metrics=metrics, num_predicted_tokens=num_predicted)

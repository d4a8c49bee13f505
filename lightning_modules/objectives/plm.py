"""Permuted language modelling (XLNet, Yang et al. 2019): sample a factorisation order per
sequence and predict the last 1/K tokens of the order from the tokens before them, with the
two-stream backbone (`family: permutation`, lightning_modules.models.xlnet): the query stream at
a target position knows its position but not its token. Partial prediction: K=6 by default
(XLNet uses 6 or 7). The output layer is tied to the token embeddings."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lightning_modules.models.xlnet import permutation_masks
from lightning_modules.objectives.base import Objective, ObjectiveOutput, token_loss
from lightning_modules.objectives.mlm import MaskedLMHead
from lightning_modules.objectives.seeding import SeededCorruption
from ptmlab.methods.objectives import PermutedLMParams


class PermutedLMObjective(Objective):
    declaration = PermutedLMParams

    name = "plm"

    def __init__(self, backbone: nn.Module, tokenizer=None, params: PermutedLMParams | None = None, **values: Any):
        super().__init__()
        self.params = params = self.declared_params(params, values)
        self.predict_fraction = 1.0 / float(params.partial_prediction_k)  # the last 1/K of the order is predicted
        self.corruption = SeededCorruption(params.seed)
        vocab_size, embedding_size = backbone.get_input_embeddings().weight.shape
        hidden = int(backbone.hidden_size)
        intermediate = int(backbone.intermediate_size)
        # Per position and layer, the query stream's own weights: query and output projections
        # (2·H²) and the feed-forward (2·H·I); keys, values and W_r·R come from the content stream.
        self.query_stream_weights_per_layer = 2 * hidden * hidden + 2 * hidden * intermediate
        self.query_stream_layers, self.query_stream_width = int(backbone.num_layers), hidden
        self.head = MaskedLMHead(
            backbone.hidden_size,
            embedding_size,
            vocab_size,
            activation=backbone.activation,
            layer_norm_eps=backbone.layer_norm_eps,
        )

    def training_flops_per_token(self, backbone_flops_per_token: float, seq_len: int) -> float:
        """The content stream is the backbone's 6·N + 6·L·T·H; the query stream runs every layer
        again for every position: 6·L·(2·H² + 2·H·I) for its weights plus 6·L·T·H for its
        attention."""
        layers, width = self.query_stream_layers, self.query_stream_width
        return (
            backbone_flops_per_token
            + 6.0 * layers * self.query_stream_weights_per_layer
            + 6.0 * layers * seq_len * width
        )

    def masks(self, batch: dict[str, torch.Tensor]):
        input_ids = batch["input_ids"]
        attention_mask = batch.get("attention_mask")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        generator = self.corruption.generator(input_ids.device)
        return permutation_masks(input_ids.shape[1], generator, self.predict_fraction, attention_mask=attention_mask)

    def forward(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> ObjectiveOutput:
        input_ids = batch["input_ids"]
        m = self.masks(batch)
        out = backbone(
            input_ids,
            attention_mask=batch.get("attention_mask"),
            token_type_ids=batch.get("token_type_ids"),
            content_mask=m.content_mask,
            query_mask=m.query_mask,
        )
        query = out.query_hidden_states[-1]
        hidden = query[m.target_mask]  # B×T×H -> N×H
        targets = input_ids[m.target_mask]
        logits = self.head(hidden, backbone.get_input_embeddings().weight)  # N×V
        loss, accuracy = token_loss(logits, targets, query)
        return ObjectiveOutput(loss=loss, metrics={"plm_acc": accuracy}, num_predicted_tokens=int(targets.numel()))

"""Next-sentence prediction (Devlin et al. 2019): from the [CLS] representation of
"[CLS] A [SEP] B [SEP]", classify whether B followed A in the document (label 1) or came from
another document (label 0). Batches come from `data.construction=segment_pairs` with
`data.pair_negative=random_document`, which puts `pair_label` in the batch.

This objective runs its own forward pass on the uncorrupted pair, so combined with MLM
(`objective=mlm_nsp`) a step costs two backbone passes; the FLOPs estimate counts both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.objectives.base import Objective, ObjectiveOutput
from ptmlab.contracts import ConfigError, DataError
from ptmlab.methods.objectives import NoArgumentsParams


class PairClassificationHead(nn.Module):
    """BERT's pooler (dense + tanh on the first token) and a 2-way classifier."""

    def __init__(self, hidden_size: int, num_labels: int = 2):
        super().__init__()
        self.pooler = nn.Linear(hidden_size, hidden_size)
        self.classifier = nn.Linear(hidden_size, num_labels)
        for layer in (self.pooler, self.classifier):
            nn.init.normal_(layer.weight, std=0.02)
            nn.init.zeros_(layer.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.tanh(self.pooler(hidden[:, 0])))  # B×T×H -> B×H -> B×2


class NextSentencePredictionObjective(Objective):
    declaration = NoArgumentsParams

    name = "nsp"
    predicts_tokens = False
    data_construction = "segment_pairs"
    pair_negative = "random_document"

    def __init__(self, backbone: nn.Module, tokenizer=None):
        super().__init__()
        if backbone.is_causal:
            raise ConfigError(
                f"objective={self.name} reads the first token's representation, which a causal "
                f"backbone ({backbone.family}) computes without seeing the pair"
            )
        self.head = PairClassificationHead(backbone.hidden_size)

    def forward(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> ObjectiveOutput:
        if "pair_label" not in batch:
            raise DataError(
                f"objective={self.name} needs sentence-pair batches with `pair_label`: set "
                f"data.construction={self.data_construction} data.pair_negative={self.pair_negative}"
            )
        out = backbone(
            batch["input_ids"], attention_mask=batch.get("attention_mask"), token_type_ids=batch.get("token_type_ids")
        )
        logits = self.head(out.last_hidden_state)
        labels = batch["pair_label"].long()
        loss = F.cross_entropy(logits.float(), labels)
        accuracy = (logits.detach().argmax(-1) == labels).float().mean()
        return ObjectiveOutput(loss=loss, metrics={f"{self.name}_acc": accuracy})

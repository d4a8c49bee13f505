"""Translation language modelling (XLM, Lample & Conneau 2019): MLM over a sentence and its
translation concatenated, "[CLS] src [SEP] tgt [SEP]", so a masked word can be recovered from
the other language. Language ids ride in `token_type_ids` (0 = source, 1 = target) and
positions restart at the target sentence, as in XLM. Batches come from a parallel-text corpus
(`data=parallel_text`: tab-separated pairs, see lightning_modules.data.parallel)."""

from __future__ import annotations

from typing import Any

import torch

from lightning_modules.objectives.base import ObjectiveOutput
from lightning_modules.objectives.mlm import MaskedLMObjective
from ptmlab.contracts import DataError
from ptmlab.methods.objectives import TranslationLMParams


def restarted_positions(token_type_ids: torch.Tensor) -> torch.Tensor:
    """B×T positions counting from 0 in the first segment and again from 0 where the segment id
    changes (the first target token)."""
    b, t = token_type_ids.shape
    positions = torch.arange(t, device=token_type_ids.device).expand(b, t)
    second = token_type_ids.bool()
    first_of_second = torch.where(second, positions, torch.full_like(positions, t)).min(dim=1).values  # B
    return torch.where(second, positions - first_of_second[:, None], positions)


class TranslationLMObjective(MaskedLMObjective):
    declaration = TranslationLMParams

    name = "tlm"

    def __init__(self, backbone, tokenizer, params: TranslationLMParams | None = None, **values: Any):
        super().__init__(backbone, tokenizer, params, **values)
        self.reset_positions = self.params.reset_positions

    def forward(self, batch, backbone) -> ObjectiveOutput:
        if "token_type_ids" not in batch:
            raise DataError(
                "objective=tlm needs sentence pairs with token_type_ids (language ids): use "
                "data=parallel_text (tab-separated source/target lines)"
            )
        if not self.reset_positions:
            return super().forward(batch, backbone)
        positions = restarted_positions(batch["token_type_ids"])
        return super().forward(batch, _WithPositions(backbone, positions))


class _WithPositions:
    """Calls the backbone with fixed position_ids; everything else passes through."""

    def __init__(self, backbone, position_ids: torch.Tensor):
        self.backbone = backbone
        self.position_ids = position_ids

    def __call__(self, input_ids, attention_mask=None, token_type_ids=None):
        return self.backbone(
            input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, position_ids=self.position_ids
        )

    def get_input_embeddings(self):
        return self.backbone.get_input_embeddings()

"""Whole-word masking: MLM that selects whole words (all their sub-word tokens together), as in
BERT's whole-word-masking release and Cui et al. (2019). Word boundaries come from the
tokenizer's vocabulary (`word_start_table`), so no word-boundary data travels with the batch."""

from __future__ import annotations

from typing import Any

import torch

from lightning_modules.objectives.corruption.word_spans import whole_word_select, word_start_table
from lightning_modules.objectives.mlm import MaskedLMObjective
from ptmlab.methods.objectives import MaskedLMParams


class WholeWordMaskedLMObjective(MaskedLMObjective):
    declaration = MaskedLMParams

    name = "mlm_wwm"

    def __init__(self, backbone, tokenizer, params: MaskedLMParams | None = None, **values: Any):
        super().__init__(backbone, tokenizer, params, **values)
        self.register_buffer("word_start_ids", word_start_table(tokenizer), persistent=False)

    def word_starts(self, input_ids: torch.Tensor) -> torch.Tensor:
        table = self.word_start_ids
        return table[input_ids.clamp(max=table.numel() - 1)]  # B×T bool

    def select_positions(self, batch, special_tokens_mask, generator):
        return whole_word_select(self.word_starts(batch["input_ids"]), special_tokens_mask, self.mask_prob, generator)

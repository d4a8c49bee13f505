"""UniLM (Dong et al. 2019): one shared encoder trained with cloze (masked-token) prediction
under four self-attention masks, one sampled per batch (lightning_modules.models.unilm):

    bidirectional   1/3   BERT's MLM
    seq2seq         1/3   source (segment A) bidirectional, target (segment B) sees the source
                          and its own prefix; only target tokens are masked
    left_to_right   1/6   token i sees j <= i
    right_to_left   1/6   token i sees j >= i

Without segment ids (packed data) the source is the first part of each row up to a random
split. The masks go in as `self_attention_mask`, so any ptmlab Transformer encoder works.
"""

from __future__ import annotations

from typing import Any

import torch

from lightning_modules.models.unilm import unilm_attention_mask
from lightning_modules.objectives.base import ObjectiveOutput, token_loss
from lightning_modules.objectives.masking import IGNORE_INDEX, replace_selected
from lightning_modules.objectives.mlm import MaskedLMObjective, special_tokens_mask_for
from ptmlab.methods.objectives import UnifiedLMParams

DEFAULT_MODE_WEIGHTS = {"bidirectional": 1 / 3, "seq2seq": 1 / 3, "left_to_right": 1 / 6, "right_to_left": 1 / 6}


def random_source_lengths(attention_mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """B source lengths uniform in [1, L-1] (L = the row's real length; 1 for rows shorter than 2)."""
    lengths = attention_mask.sum(dim=1).cpu()
    draws = torch.rand(lengths.shape, generator=generator, device=generator.device).cpu()
    split = 1 + (draws * (lengths - 1).clamp(min=1)).long()
    return torch.minimum(split, (lengths - 1).clamp(min=1)).to(attention_mask.device)


class UnifiedLMObjective(MaskedLMObjective):
    declaration = UnifiedLMParams

    name = "unilm"

    def __init__(self, backbone, tokenizer, params: UnifiedLMParams | None = None, **values: Any):
        super().__init__(backbone, tokenizer, params, **values)
        mode_weights = self.params.mode_weights
        weights = dict(mode_weights) if mode_weights is not None else dict(DEFAULT_MODE_WEIGHTS)
        self.modes = list(weights)
        self.register_buffer("mode_probs", torch.tensor([float(weights[m]) for m in self.modes]), persistent=False)

    def sample_mode(self, generator: torch.Generator) -> str:
        idx = torch.multinomial(self.mode_probs.to(generator.device), 1, generator=generator)
        return self.modes[int(idx)]

    def forward(self, batch, backbone) -> ObjectiveOutput:
        input_ids = batch["input_ids"]
        attention_mask = batch.get("attention_mask")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        generator = self.corruption.generator(input_ids.device)
        mode = self.sample_mode(generator)
        special = special_tokens_mask_for(input_ids, self.special_ids, attention_mask)
        token_type_ids = batch.get("token_type_ids")
        source_lengths = None
        if mode == "seq2seq":
            if token_type_ids is not None and bool((token_type_ids == 1).any()):
                source = token_type_ids == 0
            else:
                source_lengths = random_source_lengths(attention_mask, generator)
                source = torch.arange(input_ids.shape[1], device=input_ids.device)[None] < source_lengths[:, None]
            special = special | source  # only the target segment is predicted
        selected = self.select_positions(batch, special, generator)
        corrupted, labels = replace_selected(
            input_ids,
            selected,
            self.mask_token_id,
            self.replacement_ids,
            generator,
            self.mask_token_prob,
            self.random_token_prob,
        )
        self_attention_mask = unilm_attention_mask(mode, attention_mask, token_type_ids, source_lengths)
        out = backbone(
            corrupted,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            self_attention_mask=self_attention_mask,
        )
        predicted = labels != IGNORE_INDEX
        logits = self.head(out.last_hidden_state[predicted], backbone.get_input_embeddings().weight)  # N×V
        targets = labels[predicted]
        loss, accuracy = token_loss(logits, targets, out.last_hidden_state)
        metrics = {"mlm_acc": accuracy}
        if targets.numel():
            metrics[f"{mode}_loss"] = loss.detach()
        return ObjectiveOutput(loss=loss, metrics=metrics, num_predicted_tokens=int(targets.numel()))

"""A DIM-style span contrastive objective (InfoWord, Kong et al. 2020): maximise a lower bound
on the mutual information between a sentence with an n-gram masked out and that n-gram.

For each sequence, an n-gram (length uniform in 1..max_ngram, inside one run of ordinary tokens)
is replaced by [MASK] tokens; the global view g_i is the pooled representation (mean over real
tokens, or the first token) of the masked sequence; the local view s_j is the mean representation of n-gram j encoded on its own
("[CLS] n-gram [SEP]"). InfoNCE over the batch: the n-gram of the same sequence is the positive,
the other sequences' n-grams are the negatives; score = cos(W_g g_i, W_s s_j) / τ.
Mean pooling is the default: a first-token view of a model trained from scratch starts out the
same for every sequence and the InfoNCE gradient through it is too weak to separate them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lightning_modules.objectives.base import Objective, ObjectiveOutput
from lightning_modules.objectives.contrastive import info_nce, pool
from lightning_modules.objectives.mlm import special_tokens_mask_for
from lightning_modules.objectives.seeding import SeededCorruption
from ptmlab.contracts import ConfigError
from ptmlab.methods.objectives import SpanContrastiveParams


def sample_ngram_spans(
    special_tokens_mask: torch.Tensor, max_ngram: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """(start B, length B): per row, a length uniform in 1..max_ngram (cut to the row's longest
    run of ordinary tokens) and a start uniform over the places an n-gram of that length fits
    without covering a special token. A row with no ordinary token gets length 0."""
    valid = ~special_tokens_mask.bool()
    b, t = valid.shape
    # run[i] = number of consecutive valid tokens starting at i.
    run = torch.zeros(b, t + 1, dtype=torch.long)
    valid_cpu = valid.cpu()
    for i in range(t - 1, -1, -1):
        run[:, i] = torch.where(valid_cpu[:, i], run[:, i + 1] + 1, torch.zeros_like(run[:, i]))
    run = run[:, :t]
    lengths = torch.randint(1, max_ngram + 1, (b,), generator=generator, device=generator.device).cpu()
    lengths = torch.minimum(lengths, run.max(dim=1).values)
    fits = run >= lengths[:, None].clamp_min(1)  # B×T: an n-gram may start here
    draws = torch.rand(b, t, generator=generator, device=generator.device).cpu()
    starts = torch.where(fits, draws, torch.full_like(draws, -1.0)).argmax(dim=1)  # a uniform fitting start
    return starts.to(special_tokens_mask.device), lengths.to(special_tokens_mask.device)


class SpanContrastiveObjective(Objective):
    declaration = SpanContrastiveParams

    name = "span_contrastive"
    predicts_tokens = False

    def __init__(self, backbone: nn.Module, tokenizer, params: SpanContrastiveParams | None = None, **values: Any):
        super().__init__()
        self.params = params = self.declared_params(params, values)
        if backbone.is_causal:
            raise ConfigError(
                "objective=span_contrastive reads the first token of a masked sentence, which a "
                "causal backbone computes without seeing the sentence"
            )
        if tokenizer.mask_token_id is None:
            raise ConfigError("objective=span_contrastive needs a tokenizer with a mask token")
        self.global_pooling = params.global_pooling
        self.max_ngram, self.temperature = params.max_ngram, float(params.temperature)
        self.mask_token_id = int(tokenizer.mask_token_id)
        self.cls_id = int(tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.mask_token_id)
        self.sep_id = int(tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.pad_token_id)
        self.pad_id = int(tokenizer.pad_token_id)
        special = sorted({int(i) for i in tokenizer.all_special_ids})
        self.register_buffer("special_ids", torch.tensor(special, dtype=torch.long), persistent=False)
        self.corruption = SeededCorruption(params.seed)
        self.global_projection = nn.Linear(backbone.hidden_size, params.projection_size)
        self.local_projection = nn.Linear(backbone.hidden_size, params.projection_size)

    def training_flops_per_token(self, backbone_flops_per_token: float, seq_len: int) -> float:
        """Per token of the batch: the masked pass, plus the n-gram pass over max_ngram+2 tokens
        per sequence of seq_len."""
        return backbone_flops_per_token * (1.0 + (self.max_ngram + 2) / max(seq_len, 1))

    def views(self, batch: dict[str, torch.Tensor]):
        """(masked input_ids B×T, n-gram input_ids B×(max_ngram+2), n-gram attention mask)."""
        input_ids = batch["input_ids"]
        special = special_tokens_mask_for(input_ids, self.special_ids, batch.get("attention_mask"))
        generator = self.corruption.generator(input_ids.device)
        starts, lengths = sample_ngram_spans(special, self.max_ngram, generator)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        in_span = (positions >= starts[:, None]) & (positions < (starts + lengths)[:, None])  # B×T
        masked = input_ids.masked_fill(in_span, self.mask_token_id)
        width = self.max_ngram + 2
        ngram = torch.full((input_ids.shape[0], width), self.pad_id, dtype=input_ids.dtype, device=input_ids.device)
        ngram_mask = torch.zeros_like(ngram)
        for row, (s, n) in enumerate(zip(starts.tolist(), lengths.tolist())):
            ngram[row, : n + 2] = torch.tensor([self.cls_id, *input_ids[row, s : s + n].tolist(), self.sep_id])
            ngram_mask[row, : n + 2] = 1
        return masked, ngram, ngram_mask

    def forward(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> ObjectiveOutput:
        masked, ngram, ngram_mask = self.views(batch)
        context = backbone(
            masked, attention_mask=batch.get("attention_mask"), token_type_ids=batch.get("token_type_ids")
        ).last_hidden_state
        local = backbone(ngram, attention_mask=ngram_mask).last_hidden_state
        inner = ngram_mask.clone()
        inner[:, 0] = 0  # the n-gram's own tokens only: not [CLS] ...
        inner.scatter_(1, ngram_mask.sum(1, keepdim=True) - 1, 0)  # ... nor the closing [SEP]
        g = self.global_projection(pool(context, batch.get("attention_mask"), self.global_pooling))  # B×H -> B×P
        s = self.local_projection(pool(local, inner, "mean"))  # B×H -> B×P
        loss, accuracy = info_nce(g, s, self.temperature)
        return ObjectiveOutput(loss=loss, metrics={"span_contrastive_acc": accuracy})

"""T5's span corruption (Raffel et al. 2020): 15% of the tokens in spans of mean length 3 are
dropped from the input, each span replaced by a sentinel <extra_id_i>; the decoder produces
"<extra_id_0> span_0 <extra_id_1> span_1 ... <extra_id_k> </s>" (only the corrupted parts, so
targets are short). Sentinels are the tokenizer's <extra_id_0..19> (see
lightning_modules.data.tokenizer.EXTRA_SPECIALS); the span count is capped to fit them."""

from __future__ import annotations

from typing import Any

import torch

from lightning_modules.objectives.corruption.sentinels import random_spans_noise_mask, sentinel_corrupt
from lightning_modules.objectives.seq2seq import Seq2SeqObjective, framing
from ptmlab.contracts import ConfigError
from ptmlab.methods.objectives import SpanCorruptionParams


def sentinel_ids(tokenizer) -> list[int]:
    vocab = tokenizer.get_vocab()
    ids, i = [], 0
    while f"<extra_id_{i}>" in vocab:
        ids.append(vocab[f"<extra_id_{i}>"])
        i += 1
    return ids


class SpanCorruptionObjective(Seq2SeqObjective):
    declaration = SpanCorruptionParams

    name = "span_corruption"

    def __init__(self, backbone, tokenizer, params: SpanCorruptionParams | None = None, **values: Any):
        super().__init__(backbone, tokenizer, params, **values)
        self.sentinels = sentinel_ids(tokenizer)
        if len(self.sentinels) < 2:
            raise ConfigError(
                "objective=span_corruption needs sentinel tokens <extra_id_0>, <extra_id_1>, ... in "
                "the tokenizer (ptmlab-trained tokenizers have 20)"
            )
        self.noise_density = float(self.params.noise_density)
        self.mean_noise_span_length = float(self.params.mean_noise_span_length)
        self.frame_ids = (tokenizer.cls_token_id, tokenizer.sep_token_id)
        self.eos_id = int(tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.pad_token_id)

    def corrupt_row(self, ids: torch.Tensor, generator: torch.Generator):
        _, body, _ = framing(ids, self.frame_ids)
        noise = random_spans_noise_mask(
            body.numel(), generator, self.noise_density, self.mean_noise_span_length, max_spans=len(self.sentinels) - 1
        )
        source, target = sentinel_corrupt(body, noise, self.sentinels)
        eos = torch.tensor([self.eos_id])
        return torch.cat([source, eos]), torch.cat([target, eos])

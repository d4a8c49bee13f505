"""MASS (Song et al. 2019): masked sequence-to-sequence pre-training. A contiguous fragment of
about half the tokens (`fragment_ratio`) is replaced by [MASK] tokens in the encoder input and
the decoder predicts exactly that fragment, so the encoder must understand the unmasked part
and the decoder must rely on the encoder (it sees only the fragment's own prefix).
Simplification: the decoder's positions count from the fragment start, not from the fragment's
positions in the sentence as in MASS."""

from __future__ import annotations

from typing import Any

import torch

from lightning_modules.objectives.corruption.sentinels import mass_span
from lightning_modules.objectives.seq2seq import Seq2SeqObjective, framing
from ptmlab.contracts import ConfigError
from ptmlab.methods.objectives import MassParams


class MassObjective(Seq2SeqObjective):
    declaration = MassParams

    name = "mass"

    def __init__(self, backbone, tokenizer, params: MassParams | None = None, **values: Any):
        super().__init__(backbone, tokenizer, params, **values)
        if tokenizer.mask_token_id is None:
            raise ConfigError("objective=mass needs a tokenizer with a mask token")
        self.fragment_ratio = float(self.params.fragment_ratio)
        self.mask_token_id = int(tokenizer.mask_token_id)
        self.frame_ids = (tokenizer.cls_token_id, tokenizer.sep_token_id)

    def corrupt_row(self, ids: torch.Tensor, generator: torch.Generator):
        head, body, tail = framing(ids, self.frame_ids)
        source_body, fragment, _ = mass_span(body, self.mask_token_id, generator, self.fragment_ratio)
        source = torch.tensor([*head, *source_body.tolist(), *tail], dtype=torch.long)
        return source, fragment

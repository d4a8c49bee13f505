"""BART's denoising autoencoder (Lewis et al. 2020): corrupt the document with any combination
of token masking, token deletion, text infilling (Poisson λ=3 spans, one <mask> each),
sentence permutation and document rotation (lightning_modules.objectives.corruption.denoising),
then reconstruct the ORIGINAL document with the decoder. BART-large's recipe is text infilling
at 30% plus sentence permutation (the defaults in conf/objective/dae.yaml)."""

from __future__ import annotations

from typing import Any

import torch

from lightning_modules.objectives.corruption.denoising import NoiseConfig, apply_noise
from lightning_modules.objectives.seq2seq import Seq2SeqObjective, framing
from ptmlab.contracts import ConfigError
from ptmlab.methods.objectives import DenoisingAutoencoderParams

FULL_STOPS = (".", "!", "?")


def full_stop_ids(tokenizer) -> list[int]:
    """Ids of sentence-final punctuation, with or without a word-start mark (Ġ, ▁)."""
    return sorted(idx for piece, idx in tokenizer.get_vocab().items() if piece.lstrip("Ġ▁") in FULL_STOPS)


class DenoisingAutoencoderObjective(Seq2SeqObjective):
    declaration = DenoisingAutoencoderParams

    name = "dae"

    def __init__(self, backbone, tokenizer, params: DenoisingAutoencoderParams | None = None, **values: Any):
        super().__init__(backbone, tokenizer, params, **values)
        params = self.params
        self.noise = NoiseConfig(
            token_masking=float(params.token_masking),
            token_deletion=float(params.token_deletion),
            text_infilling=float(params.text_infilling),
            poisson_lambda=float(params.poisson_lambda),
            sentence_permutation=params.sentence_permutation,
            document_rotation=params.document_rotation,
        )
        if (self.noise.token_masking or self.noise.text_infilling) and tokenizer.mask_token_id is None:
            raise ConfigError("objective=dae with token_masking/text_infilling needs a tokenizer mask token")
        self.mask_token_id = int(tokenizer.mask_token_id) if tokenizer.mask_token_id is not None else -1
        self.full_stop_ids = full_stop_ids(tokenizer)
        self.frame_ids = (tokenizer.cls_token_id, tokenizer.sep_token_id)

    def corrupt_row(self, ids: torch.Tensor, generator: torch.Generator):
        head, body, tail = framing(ids, self.frame_ids)
        noised = apply_noise(body, self.noise, self.mask_token_id, self.full_stop_ids, generator)
        source = torch.tensor([*head, *noised.tolist(), *tail], dtype=torch.long)
        return source, ids.clone()

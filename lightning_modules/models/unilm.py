"""UniLM (Dong et al. 2019): one shared Transformer encoder whose self-attention mask selects the
language-modelling task per batch, `family: encoder`.

    bidirectional    every token sees every token (BERT's cloze)
    left_to_right    token i sees tokens j <= i (a GPT-style LM on the same parameters)
    right_to_left    token i sees tokens j >= i
    seq2seq          source segment (token type 0) bidirectional within itself; target segment
                     (token type 1) sees the whole source and the target up to itself

`unilm_attention_mask` is the pure function building the B×T×T "may attend" mask;
`UnilmEncoder` is BERT's encoder taking `mode=` per call (default: its configured `mode`).

Family: UniLM is architecturally a BERT encoder, so it is `family: encoder` and every encoder
objective, task, adaptation and probe takes it; the masks also work on any `TransformerBackbone`
encoder (pass `self_attention_mask=unilm_attention_mask(...)`), so a UniLM objective can accept
`family: encoder` and call `backbone(..., self_attention_mask=...)`, which works for every
ptmlab Transformer encoder, or `mode=` where the backbone is a `UnilmEncoder`. Exported weights
are a BERT's (`to_hf` gives `BertModel`).
"""

from __future__ import annotations

import torch

from lightning_modules.models.base import BackboneOutput
from lightning_modules.models.transformer import TransformerEncoder
from ptmlab.contracts import ConfigError
from ptmlab.methods.models import UnilmEncoderParams

UNILM_MODES = ("bidirectional", "left_to_right", "right_to_left", "seq2seq")


def unilm_attention_mask(
    mode: str,
    attention_mask: torch.Tensor,
    token_type_ids: torch.Tensor | None = None,
    source_lengths: torch.Tensor | None = None,
) -> torch.Tensor:
    """B×T×T bool, True where query i may attend to key j; padding keys (attention_mask 0) are
    never allowed. seq2seq takes the source as token type 0 (`token_type_ids`, source first, as
    BERT's sentence pairs) or as the first `source_lengths[b]` positions of each row."""
    if mode not in UNILM_MODES:
        raise ConfigError(f"UniLM mode={mode!r} is not one of {', '.join(UNILM_MODES)}")
    real = attention_mask.bool()  # B×T
    batch, seq_len = real.shape
    keys = real[:, None, :].expand(batch, seq_len, seq_len)  # B×T -> B×T(query)×T(key)
    if mode == "bidirectional":
        return keys.clone()
    positions = torch.arange(seq_len, device=real.device)
    key_not_after_query = positions[None, :] <= positions[:, None]  # T×T: j <= i
    if mode == "left_to_right":
        return keys & key_not_after_query
    if mode == "right_to_left":
        return keys & key_not_after_query.T
    if source_lengths is not None:
        source = positions[None, :] < source_lengths.to(real.device)[:, None]  # B×T
    elif token_type_ids is not None:
        source = token_type_ids == 0
    else:
        raise ValueError("UniLM mode='seq2seq' needs token_type_ids (source = type 0) or source_lengths")
    source = source & real
    target = ~source & real
    target_prefix = target[:, :, None] & target[:, None, :] & key_not_after_query  # B×T×T
    return keys & (source[:, None, :] | target_prefix)


class UnilmEncoder(TransformerEncoder):
    declaration = UnilmEncoderParams

    family = "encoder"
    is_causal = False  # per call: left_to_right / right_to_left / seq2seq masks come from `mode`

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int = 128,
        num_layers: int = 2,
        num_heads: int = 2,
        intermediate_size: int = 512,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        pre_layer_norm: bool = False,
        layer_norm_eps: float = 1e-12,
        activation: str = "gelu",
        initializer_range: float = 0.02,
        mode: str = "bidirectional",
    ):
        if mode not in UNILM_MODES:
            raise ConfigError(f"model.backbone.mode={mode!r} is not one of {', '.join(UNILM_MODES)}")
        super().__init__(
            vocab_size,
            hidden_size,
            num_layers,
            num_heads,
            intermediate_size,
            max_position_embeddings,
            type_vocab_size,
            dropout,
            attention_dropout,
            pre_layer_norm,
            layer_norm_eps,
            activation,
            initializer_range,
        )
        self.mode = mode

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        self_attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        mode: str | None = None,
        source_lengths: torch.Tensor | None = None,
    ) -> BackboneOutput:
        """`mode` (default: the configured one) builds the mask unless `self_attention_mask` is given."""
        mode = mode or self.mode
        if self_attention_mask is None and mode != "bidirectional":
            mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
            self_attention_mask = unilm_attention_mask(mode, mask, token_type_ids, source_lengths)
        elif mode not in UNILM_MODES:
            raise ConfigError(f"UniLM mode={mode!r} is not one of {', '.join(UNILM_MODES)}")
        return super().forward(
            input_ids, attention_mask, token_type_ids, output_attentions, self_attention_mask, position_ids
        )

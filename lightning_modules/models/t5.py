"""T5 (Raffel et al. 2020): the encoder–decoder of `encoder_decoder.py` with T5's own choices,
`family: encoder_decoder`.

    positions      none in the embeddings; a learned scalar bias per head and relative-position
                   bucket is added to the attention scores (computed once per side, shared by
                   its layers; bidirectional buckets in the encoder, causal ones in the decoder;
                   cross-attention has none)
    normalisation  pre-LN with RMSNorm (no bias, no mean subtraction), a final RMSNorm per side
    projections    no biases anywhere; attention scores are not scaled by 1/sqrt(d) (T5 folds
                   the scale into its initialisation)
    feed-forward   ReLU

Everything else (cross-attention, the shared token table, the output fields, `encode`/`decode`)
is `TransformerEncoderDecoder`'s. The weights convert to and from Hugging Face `T5Model`
(`to_hf`/`from_hf`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from lightning_modules.models.base import BackboneOutput
from lightning_modules.models.encoder_decoder import (
    PreLNCrossAttentionLayer,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
    TransformerEncoderDecoder,
    tied_generator,
)
from lightning_modules.models.transformer import MultiHeadAttention, PreLNLayer, allowed_to_bias
from ptmlab.contracts import BackboneError
from ptmlab.methods.models import T5EncoderDecoderParams


def relative_position_bucket(
    relative_position: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int
) -> torch.Tensor:
    """T5's buckets: exact for small distances, logarithmic up to max_distance, one bucket beyond;
    bidirectional buckets give keys before and after the query separate halves."""
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # only keys at or before the query
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    large = (
        max_exact
        + (
            torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
        ).long()
    )
    large = large.clamp(max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


class RelativePositionBias(nn.Module):
    def __init__(self, num_heads: int, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True):
        super().__init__()
        self.bias = nn.Embedding(num_buckets, num_heads)
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional

    def forward(self, q_len: int, k_len: int, device: torch.device) -> torch.Tensor:
        """1×heads×T_q×T_k additive bias."""
        relative = (
            torch.arange(k_len, device=device)[None, :] - torch.arange(q_len, device=device)[:, None]
        )  # key - query
        buckets = relative_position_bucket(relative, self.bidirectional, self.num_buckets, self.max_distance)
        return self.bias(buckets).permute(2, 0, 1).unsqueeze(0)  # T_q×T_k×heads -> 1×heads×T_q×T_k


class UnscaledQuery(nn.Linear):
    """A bias-free query projection multiplied by sqrt(d), which cancels the 1/sqrt(d) that
    MultiHeadAttention (scaled_dot_product_attention) applies: T5's scores are unscaled, and its
    weights then load as they are."""

    def __init__(self, hidden_size: int, head_dim: int):
        super().__init__(hidden_size, hidden_size, bias=False)
        self.scale = math.sqrt(head_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * self.scale


def make_t5_attention(attention: MultiHeadAttention, hidden_size: int) -> MultiHeadAttention:
    attention.query = UnscaledQuery(hidden_size, attention.head_dim)
    attention.key = nn.Linear(hidden_size, hidden_size, bias=False)
    attention.value = nn.Linear(hidden_size, hidden_size, bias=False)
    attention.output = nn.Linear(hidden_size, hidden_size, bias=False)
    return attention


def make_t5_sublayers(layer: nn.Module, hidden_size: int, intermediate_size: int, eps: float) -> None:
    """Swap a pre-LN layer's parts for T5's: bias-free projections and RMSNorm."""
    make_t5_attention(layer.attention, hidden_size)
    layer.attention_norm = nn.RMSNorm(hidden_size, eps=eps)
    layer.feed_forward.dense_in = nn.Linear(hidden_size, intermediate_size, bias=False)
    layer.feed_forward.dense_out = nn.Linear(intermediate_size, hidden_size, bias=False)
    layer.feed_forward_norm = nn.RMSNorm(hidden_size, eps=eps)
    if hasattr(layer, "cross_attention"):
        make_t5_attention(layer.cross_attention, hidden_size)
        layer.cross_attention_norm = nn.RMSNorm(hidden_size, eps=eps)


class T5EncoderLayer(PreLNLayer):
    def __init__(
        self,
        hidden_size,
        num_heads,
        intermediate_size,
        dropout=0.1,
        attention_dropout=0.1,
        layer_norm_eps=1e-6,
        activation="relu",
    ):
        super().__init__(
            hidden_size, num_heads, intermediate_size, dropout, attention_dropout, layer_norm_eps, activation
        )
        make_t5_sublayers(self, hidden_size, intermediate_size, layer_norm_eps)


class T5DecoderLayer(PreLNCrossAttentionLayer):
    def __init__(
        self,
        hidden_size,
        num_heads,
        intermediate_size,
        dropout=0.1,
        attention_dropout=0.1,
        layer_norm_eps=1e-6,
        activation="relu",
    ):
        super().__init__(
            hidden_size, num_heads, intermediate_size, dropout, attention_dropout, layer_norm_eps, activation
        )
        make_t5_sublayers(self, hidden_size, intermediate_size, layer_norm_eps)


class TokenEmbeddings(nn.Module):
    """Token embeddings and dropout only: T5's positions live in the attention bias."""

    def __init__(self, vocab_size: int, hidden_size: int, dropout: float):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return self.dropout(self.word_embeddings(input_ids))


class _T5Side:
    """What both T5 sides add to their TransformerBackbone: embeddings, layers, RMSNorm, and the
    relative-position bias combined with the padding (and causal) mask."""

    num_buckets = 32
    max_distance = 128

    def _finish_t5(self) -> None:
        self.final_layer_norm = nn.RMSNorm(self.hidden_size, eps=self.layer_norm_eps)
        self.final_dropout = nn.Dropout(self.dropout)
        self.relative_attention_bias = RelativePositionBias(
            self.num_heads, self.num_buckets, self.max_distance, bidirectional=not self.is_causal
        )
        nn.init.normal_(self.relative_attention_bias.bias.weight, std=self.initializer_range)

    def build_embeddings(self) -> nn.Module:
        return TokenEmbeddings(self.vocab_size, self.hidden_size, self.dropout)

    def self_attention_bias(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        self_attention_mask: torch.Tensor | None,
        dtype: torch.dtype,
    ) -> torch.Tensor:
        seq_len = input_ids.shape[1]
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)  # so the mask bias (and causality) is explicit
        mask_bias = self.attention_bias(attention_mask, self_attention_mask, seq_len, dtype)  # B×1×T×T or B×1×1×T
        return mask_bias + self.relative_attention_bias(seq_len, seq_len, input_ids.device).to(dtype)

    def _finish_states(self, hidden_states: list[torch.Tensor]) -> list[torch.Tensor]:
        hidden_states[-1] = self.final_dropout(self.final_layer_norm(hidden_states[-1]))
        return hidden_states


class T5Encoder(_T5Side, Seq2SeqEncoder):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._finish_t5()

    @property
    def layer_class(self):
        return T5EncoderLayer

    def forward(
        self,
        input_ids,
        attention_mask=None,
        token_type_ids=None,
        output_attentions=False,
        self_attention_mask=None,
        position_ids=None,
    ):

        x = self.embeddings(input_ids)
        bias = self.self_attention_bias(input_ids, attention_mask, self_attention_mask, x.dtype)
        hidden_states, attentions = self.stack(x, bias, is_causal=False, output_attentions=output_attentions)
        return BackboneOutput(
            hidden_states=tuple(self._finish_states(hidden_states)),
            attentions=tuple(attentions) if attentions is not None else None,
        )


class T5Decoder(_T5Side, Seq2SeqDecoder):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._finish_t5()

    @property
    def layer_class(self):
        return T5DecoderLayer

    def forward(
        self,
        input_ids,
        attention_mask=None,
        encoder_hidden_states=None,
        encoder_attention_mask=None,
        output_attentions=False,
        position_ids=None,
    ):
        if encoder_hidden_states is None:
            raise ValueError("T5Decoder needs encoder_hidden_states")
        x = self.embeddings(input_ids)
        bias = self.self_attention_bias(input_ids, attention_mask, None, x.dtype)
        encoder_bias = None
        if encoder_attention_mask is not None:
            encoder_bias = allowed_to_bias(encoder_attention_mask.bool()[:, None, None, :], x.dtype)  # B×S -> B×1×1×S
        hidden_states, probs = self.stack(
            x,
            bias,
            is_causal=False,
            output_attentions=output_attentions,
            encoder_states=encoder_hidden_states,
            encoder_bias=encoder_bias,
        )
        hidden_states = self._finish_states(hidden_states)
        if probs is None:
            return hidden_states, None, None
        return hidden_states, [p[0] for p in probs], [p[1] for p in probs]


class T5EncoderDecoder(TransformerEncoderDecoder):
    declaration = T5EncoderDecoderParams

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int = 128,
        num_layers: int = 2,
        num_decoder_layers: int | None = None,
        num_heads: int = 2,
        intermediate_size: int = 512,
        dropout: float = 0.1,
        layer_norm_eps: float = 1e-6,
        initializer_range: float = 0.02,
    ):
        # T5 has no position table and one dropout rate; max_position_embeddings is unused.
        super().__init__(
            vocab_size,
            hidden_size,
            num_layers,
            num_decoder_layers,
            num_heads,
            intermediate_size,
            max_position_embeddings=1,
            dropout=dropout,
            attention_dropout=dropout,
            pre_layer_norm=True,
            layer_norm_eps=layer_norm_eps,
            activation="relu",
            initializer_range=initializer_range,
        )

    def build_encoder(self, **side):
        return T5Encoder(**side)

    def build_decoder(self, **side):
        return T5Decoder(**side)

    # -- Hugging Face conversion -----------------------------------------------------------------
    def to_hf(self):
        """The same weights as a Hugging Face `T5Model`."""
        from transformers import T5Config, T5Model

        e, d = self.encoder, self.decoder
        config = T5Config(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            d_kv=self.hidden_size // self.num_heads,
            d_ff=e.intermediate_size,
            num_layers=e.num_layers,
            num_decoder_layers=d.num_layers,
            num_heads=self.num_heads,
            relative_attention_num_buckets=e.num_buckets,
            relative_attention_max_distance=e.max_distance,
            dropout_rate=e.dropout,
            layer_norm_epsilon=self.layer_norm_eps,
            feed_forward_proj="relu",
            initializer_factor=1.0,
            tie_word_embeddings=True,
        )
        model = T5Model(config)
        model.load_state_dict(t5_state_dict_to_hf(self.state_dict(), e.num_layers, d.num_layers), strict=True)
        return model.eval()

    def to_hf_generator(self):
        """`T5ForConditionalGeneration` over `to_hf()`'s weights, its LM head the token table and its
        decoder outputs unscaled (`scale_decoder_outputs=False`: Hugging Face T5 otherwise multiplies
        them by d_model^-0.5 before a tied head), so its logits are the generation task model's."""
        from transformers import T5ForConditionalGeneration

        base = self.to_hf()
        base.config.scale_decoder_outputs = False
        return tied_generator(base, T5ForConditionalGeneration)

    def hf_generator_linears(self) -> dict[str, list[str]]:
        return {
            theirs.removesuffix(".weight"): [ours.removesuffix(".weight")]
            for ours, theirs in _t5_param_map(self.num_layers, self.num_decoder_layers).items()
        }

    @classmethod
    def from_hf(cls, model) -> T5EncoderDecoder:
        c = model.config
        if (
            c.feed_forward_proj != "relu"
            or c.d_kv * c.num_heads != c.d_model
            or c.relative_attention_num_buckets != 32
            or c.relative_attention_max_distance != 128
        ):
            raise BackboneError(
                "T5Model needs feed_forward_proj=relu, d_kv·num_heads = d_model and 32 buckets up "
                "to distance 128 to have a T5EncoderDecoder counterpart"
            )
        backbone = cls(
            vocab_size=c.vocab_size,
            hidden_size=c.d_model,
            num_layers=c.num_layers,
            num_decoder_layers=c.num_decoder_layers,
            num_heads=c.num_heads,
            intermediate_size=c.d_ff,
            dropout=c.dropout_rate,
            layer_norm_eps=c.layer_norm_epsilon,
        )
        backbone.load_state_dict(
            t5_state_dict_from_hf(model.state_dict(), c.num_layers, c.num_decoder_layers), strict=True
        )
        return backbone


_T5_ENCODER_LAYER = {
    "attention.query": "layer.0.SelfAttention.q",
    "attention.key": "layer.0.SelfAttention.k",
    "attention.value": "layer.0.SelfAttention.v",
    "attention.output": "layer.0.SelfAttention.o",
    "attention_norm": "layer.0.layer_norm",
    "feed_forward.dense_in": "layer.1.DenseReluDense.wi",
    "feed_forward.dense_out": "layer.1.DenseReluDense.wo",
    "feed_forward_norm": "layer.1.layer_norm",
}
_T5_DECODER_LAYER = {
    **{k: v for k, v in _T5_ENCODER_LAYER.items() if v.startswith("layer.0")},
    "cross_attention.query": "layer.1.EncDecAttention.q",
    "cross_attention.key": "layer.1.EncDecAttention.k",
    "cross_attention.value": "layer.1.EncDecAttention.v",
    "cross_attention.output": "layer.1.EncDecAttention.o",
    "cross_attention_norm": "layer.1.layer_norm",
    "feed_forward.dense_in": "layer.2.DenseReluDense.wi",
    "feed_forward.dense_out": "layer.2.DenseReluDense.wo",
    "feed_forward_norm": "layer.2.layer_norm",
}


def _t5_param_map(num_encoder_layers: int, num_decoder_layers: int) -> dict[str, str]:
    """ours -> T5Model parameter names (all weights: T5 has no biases)."""
    mapping = {}
    for side, n, layer_map in (
        ("encoder", num_encoder_layers, _T5_ENCODER_LAYER),
        ("decoder", num_decoder_layers, _T5_DECODER_LAYER),
    ):
        mapping[f"{side}.final_layer_norm.weight"] = f"{side}.final_layer_norm.weight"
        mapping[f"{side}.relative_attention_bias.bias.weight"] = (
            f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
        )
        for i in range(n):
            for ours, theirs in layer_map.items():
                mapping[f"{side}.stack.layers.{i}.{ours}.weight"] = f"{side}.block.{i}.{theirs}.weight"
    return mapping


def t5_state_dict_to_hf(state, num_encoder_layers, num_decoder_layers):
    out = {theirs: state[ours] for ours, theirs in _t5_param_map(num_encoder_layers, num_decoder_layers).items()}
    table = state["encoder.embeddings.word_embeddings.weight"]
    out.update({"shared.weight": table, "encoder.embed_tokens.weight": table, "decoder.embed_tokens.weight": table})
    return out


def t5_state_dict_from_hf(state, num_encoder_layers, num_decoder_layers):
    out = {ours: state[theirs] for ours, theirs in _t5_param_map(num_encoder_layers, num_decoder_layers).items()}
    for side in ("encoder", "decoder"):
        out[f"{side}.embeddings.word_embeddings.weight"] = state["shared.weight"]
    return out

"""Transformer encoder–decoder (Vaswani et al. 2017), BART-flavoured (Lewis et al. 2020),
`family: encoder_decoder`.

    encoder   bidirectional self-attention over the (corrupted) source
    decoder   causal self-attention over the target prefix, then cross-attention to the encoder's
              last hidden states, then the feed-forward
    shared    one token-embedding table for encoder, decoder (and the LM head an objective ties
              to `get_input_embeddings()`); positions are learned and separate per side

BART's choices are the defaults: post-LN blocks with a LayerNorm on the embeddings, GELU, no
token types, LayerNorm eps 1e-5; the weights then convert to Hugging Face `BartModel`
(`to_hf`/`from_hf`). `pre_layer_norm=True` gives the pre-LN arrangement (a final LayerNorm on
each side instead of the embedding LayerNorm). T5 itself (relative position buckets, RMSNorm,
bias-free unscaled attention) is the subclass in `t5.py`, through `build_encoder`/`build_decoder`.

forward(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask) returns an
`EncoderDecoderOutput`: `hidden_states`/`attentions` are the ENCODER's (so probes, scalar mixes
and sentence heads read the encoder as for any encoder), and the decoder's are in
`decoder_hidden_states` / `decoder_attentions` / `cross_attentions`. Without `decoder_input_ids`
only the encoder runs. Objectives (DAE/BART noising, T5 span corruption, MASS) call
`backbone(corrupted, attention_mask, decoder_input_ids=shifted_targets, decoder_attention_mask=...)`
and project `decoder_hidden_states[-1]` with the shared table; `encode` / `decode` are there for
generation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from lightning_modules.models.base import Backbone, BackboneOutput
from lightning_modules.models.transformer import (
    MultiHeadAttention,
    PostLNLayer,
    TransformerBackbone,
    allowed_to_bias,
    rename_state_keys,
)
from ptmlab.contracts import BackboneError
from ptmlab.methods.models import TransformerEncoderDecoderParams


@dataclass
class EncoderDecoderOutput(BackboneOutput):
    decoder_hidden_states: tuple[torch.Tensor, ...] | None = None  # L_dec+1 × (B, T_dec, H)
    decoder_attentions: tuple[torch.Tensor, ...] | None = None  # L_dec × (B, heads, T_dec, T_dec)
    cross_attentions: tuple[torch.Tensor, ...] | None = None  # L_dec × (B, heads, T_dec, T_enc)

    @property
    def decoder_last_hidden_state(self) -> torch.Tensor | None:
        return None if self.decoder_hidden_states is None else self.decoder_hidden_states[-1]


def tied_generator(base: nn.Module, generator_cls: type, inner: str = "") -> nn.Module:
    """`generator_cls(base.config)` holding the Hugging Face model `base`'s weights (at submodule
    `inner`: BART's `model`; T5's at the top), its LM head tied to the token table, in eval mode."""
    model = generator_cls(base.config)
    target = model.get_submodule(inner) if inner else model
    missing, unexpected = target.load_state_dict(base.state_dict(), strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise BackboneError(f"{generator_cls.__name__}: weights do not map ({(unexpected or missing)[0]})")
    model.lm_head.weight = model.get_input_embeddings().weight
    return model.eval()


# -- decoder blocks ----------------------------------------------------------------------------------


class PostLNCrossAttentionLayer(PostLNLayer):
    """BART's decoder block: x = LN(x + SelfAttn(x)); x = LN(x + CrossAttn(x, enc)); x = LN(x + FFN(x)).
    Returns (x, (self-attention probs, cross-attention probs)) when asked for attentions."""

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        intermediate_size: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        layer_norm_eps: float = 1e-5,
        activation: str = "gelu",
    ):
        super().__init__(
            hidden_size, num_heads, intermediate_size, dropout, attention_dropout, layer_norm_eps, activation
        )
        self.cross_attention = MultiHeadAttention(hidden_size, num_heads, attention_dropout, dropout)
        self.cross_attention_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        attention_bias: torch.Tensor | None = None,
        is_causal: bool = False,
        output_attentions: bool = False,
        encoder_states: torch.Tensor | None = None,
        encoder_bias: torch.Tensor | None = None,
    ):
        attended, probs = self.attention(x, attention_bias, is_causal, output_attentions)
        x = self.attention_norm(x + attended)
        crossed, cross_probs = self.cross_attention(
            x, encoder_bias, False, output_attentions, key_value_states=encoder_states
        )
        x = self.cross_attention_norm(x + crossed)
        x = self.feed_forward_norm(x + self.feed_forward(x))
        return x, ((probs, cross_probs) if output_attentions else None)


class PreLNCrossAttentionLayer(PostLNCrossAttentionLayer):
    """The pre-LN decoder block (T5, mBART): x = x + SelfAttn(LN(x)); x = x + CrossAttn(LN(x), enc);
    x = x + FFN(LN(x)). Same parameters as the post-LN block."""

    def forward(
        self,
        x: torch.Tensor,
        attention_bias: torch.Tensor | None = None,
        is_causal: bool = False,
        output_attentions: bool = False,
        encoder_states: torch.Tensor | None = None,
        encoder_bias: torch.Tensor | None = None,
    ):
        attended, probs = self.attention(self.attention_norm(x), attention_bias, is_causal, output_attentions)
        x = x + attended
        crossed, cross_probs = self.cross_attention(
            self.cross_attention_norm(x), encoder_bias, False, output_attentions, key_value_states=encoder_states
        )
        x = x + crossed
        x = x + self.feed_forward(self.feed_forward_norm(x))
        return x, ((probs, cross_probs) if output_attentions else None)


# -- the two sides ---------------------------------------------------------------------------------


class Seq2SeqEncoder(TransformerBackbone):
    """The encoder side: a bidirectional TransformerBackbone without token types."""

    family = "encoder"
    is_causal = False


class Seq2SeqDecoder(TransformerBackbone):
    """The decoder side: causal self-attention plus cross-attention to the encoder's states."""

    family = "decoder"
    is_causal = True

    @property
    def layer_class(self):
        return PreLNCrossAttentionLayer if self.pre_layer_norm else PostLNCrossAttentionLayer

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        position_ids: torch.Tensor | None = None,
    ):
        """(hidden states L+1 × B×T×H, self-attentions, cross-attentions)."""
        if encoder_hidden_states is None:
            raise ValueError("Seq2SeqDecoder needs encoder_hidden_states")
        x = self.embeddings(input_ids, position_ids=position_ids)
        bias = self.attention_bias(attention_mask, None, input_ids.shape[1], x.dtype)
        encoder_bias = None
        if encoder_attention_mask is not None:
            encoder_bias = allowed_to_bias(encoder_attention_mask.bool()[:, None, None, :], x.dtype)  # B×S -> B×1×1×S
        hidden_states, probs = self.stack(
            x,
            bias,
            is_causal=bias is None,
            output_attentions=output_attentions,
            encoder_states=encoder_hidden_states,
            encoder_bias=encoder_bias,
        )
        if self.final_layer_norm is not None:
            hidden_states[-1] = self.final_layer_norm(hidden_states[-1])
        if probs is None:
            return hidden_states, None, None
        return hidden_states, [p[0] for p in probs], [p[1] for p in probs]


class TransformerEncoderDecoder(Backbone):
    declaration = TransformerEncoderDecoderParams

    family = "encoder_decoder"
    is_causal = False  # the encoder is bidirectional; the decoder's causality is its own

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int = 128,
        num_layers: int = 2,
        num_decoder_layers: int | None = None,
        num_heads: int = 2,
        intermediate_size: int = 512,
        max_position_embeddings: int = 512,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        pre_layer_norm: bool = False,
        layer_norm_eps: float = 1e-5,
        activation: str = "gelu",
        initializer_range: float = 0.02,
    ):
        super().__init__()
        side = dict(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            num_heads=num_heads,
            intermediate_size=intermediate_size,
            max_position_embeddings=max_position_embeddings,
            type_vocab_size=0,
            dropout=dropout,
            attention_dropout=attention_dropout,
            pre_layer_norm=pre_layer_norm,
            layer_norm_eps=layer_norm_eps,
            activation=activation,
            initializer_range=initializer_range,
        )
        self.encoder = self.build_encoder(num_layers=num_layers, **side)
        self.decoder = self.build_decoder(
            num_layers=num_decoder_layers if num_decoder_layers is not None else num_layers, **side
        )
        self.decoder.embeddings.word_embeddings = self.encoder.embeddings.word_embeddings  # shared table

        e = self.encoder
        self.vocab_size, self.hidden_size = e.vocab_size, e.hidden_size
        self.num_heads, self.pre_layer_norm = e.num_heads, e.pre_layer_norm
        self.activation, self.layer_norm_eps = e.activation, e.layer_norm_eps

    # the counts follow the sides, so dropping layers of a side (compression) updates them
    @property
    def num_layers(self) -> int:
        return self.encoder.num_layers

    @property
    def num_decoder_layers(self) -> int:
        return self.decoder.num_layers

    def layer_stacks(self) -> list[nn.Module]:
        return [self.encoder, self.decoder]

    # -- hooks for variants (T5 swaps both sides) --------------------------------------------------
    def build_encoder(self, **side) -> TransformerBackbone:
        return Seq2SeqEncoder(**side)

    def build_decoder(self, **side) -> TransformerBackbone:
        return Seq2SeqDecoder(**side)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.embeddings.word_embeddings

    def encode(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, output_attentions: bool = False
    ) -> BackboneOutput:
        return self.encoder(input_ids, attention_mask, output_attentions=output_attentions)

    def decode(
        self,
        decoder_input_ids: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
    ):
        """(decoder hidden states, self-attentions, cross-attentions); `attention_mask` is the source's."""
        return self.decoder(
            decoder_input_ids, decoder_attention_mask, encoder_hidden_states, attention_mask, output_attentions
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
    ) -> EncoderDecoderOutput:
        encoded = self.encode(input_ids, attention_mask, output_attentions)  # token types: none in BART
        out = EncoderDecoderOutput(hidden_states=encoded.hidden_states, attentions=encoded.attentions)
        if decoder_input_ids is None:
            return out
        states, self_probs, cross_probs = self.decode(
            decoder_input_ids, encoded.last_hidden_state, attention_mask, decoder_attention_mask, output_attentions
        )
        out.decoder_hidden_states = tuple(states)
        if self_probs is not None:
            out.decoder_attentions, out.cross_attentions = tuple(self_probs), tuple(cross_probs)
        return out

    # -- Hugging Face conversion -----------------------------------------------------------------
    def to_hf(self):
        """The same weights as a Hugging Face `BartModel`, or None for the pre-LN arrangement."""
        if self.pre_layer_norm or self.activation not in ("gelu", "gelu_new", "relu"):
            return None
        from transformers import BartConfig, BartModel

        e, d = self.encoder, self.decoder
        config = BartConfig(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            encoder_layers=e.num_layers,
            decoder_layers=d.num_layers,
            encoder_attention_heads=e.num_heads,
            decoder_attention_heads=d.num_heads,
            encoder_ffn_dim=e.intermediate_size,
            decoder_ffn_dim=d.intermediate_size,
            max_position_embeddings=e.max_position_embeddings,
            activation_function=self.activation,
            dropout=e.dropout,
            attention_dropout=e.attention_dropout,
            activation_dropout=0.0,
            scale_embedding=False,
            init_std=e.initializer_range,
        )
        model = BartModel(config)
        model.load_state_dict(bart_state_dict_to_hf(self.state_dict(), e.num_layers, d.num_layers), strict=True)
        return model.eval()

    def to_hf_generator(self):
        """`BartForConditionalGeneration` over `to_hf()`'s weights: its LM head is the token table
        and its final_logits_bias zero, so its logits are the generation task model's."""
        base = self.to_hf()
        if base is None:
            return None
        from transformers import BartForConditionalGeneration

        model = tied_generator(base, BartForConditionalGeneration, inner="model")
        # BartConfig's defaults force id 2 (facebook/bart's </s>) as the last token at the length limit:
        # in a ptmlab vocabulary id 2 is whatever the tokenizer put there, and the task model never forces it
        model.generation_config.forced_eos_token_id = model.generation_config.forced_bos_token_id = None
        return model.eval()

    def hf_generator_linears(self) -> dict[str, list[str]]:
        return {
            f"model.{theirs}": [ours]
            for ours, theirs in _bart_module_map(self.num_layers, self.num_decoder_layers).items()
        }

    @classmethod
    def from_hf(cls, model) -> TransformerEncoderDecoder:
        """Build from a Hugging Face `BartModel`."""
        c = model.config
        if (
            c.scale_embedding
            or c.activation_dropout
            or c.encoder_ffn_dim != c.decoder_ffn_dim
            or c.encoder_attention_heads != c.decoder_attention_heads
        ):
            raise BackboneError(
                "BartModel with scale_embedding, activation_dropout or different encoder/decoder "
                "widths has no TransformerEncoderDecoder counterpart"
            )
        backbone = cls(
            vocab_size=c.vocab_size,
            hidden_size=c.d_model,
            num_layers=c.encoder_layers,
            num_decoder_layers=c.decoder_layers,
            num_heads=c.encoder_attention_heads,
            intermediate_size=c.encoder_ffn_dim,
            max_position_embeddings=c.max_position_embeddings,
            dropout=c.dropout,
            attention_dropout=c.attention_dropout,
            pre_layer_norm=False,
            activation=c.activation_function,
            initializer_range=c.init_std,
        )
        backbone.load_state_dict(
            bart_state_dict_from_hf(model.state_dict(), c.encoder_layers, c.decoder_layers), strict=True
        )
        return backbone


# -- state-dict mapping ---------------------------------------------------------------------------------

_BART_LAYER = {
    "attention.query": "self_attn.q_proj",
    "attention.key": "self_attn.k_proj",
    "attention.value": "self_attn.v_proj",
    "attention.output": "self_attn.out_proj",
    "attention_norm": "self_attn_layer_norm",
    "cross_attention.query": "encoder_attn.q_proj",
    "cross_attention.key": "encoder_attn.k_proj",
    "cross_attention.value": "encoder_attn.v_proj",
    "cross_attention.output": "encoder_attn.out_proj",
    "cross_attention_norm": "encoder_attn_layer_norm",
    "feed_forward.dense_in": "fc1",
    "feed_forward.dense_out": "fc2",
    "feed_forward_norm": "final_layer_norm",
}
BART_POSITION_OFFSET = 2  # BART's learned positions start at row 2 of its table (a fairseq legacy)


def _bart_module_map(num_encoder_layers: int, num_decoder_layers: int) -> dict[str, str]:
    """ours -> BartModel module names (without the token tables and positions)."""
    mapping = {}
    for side, n in (("encoder", num_encoder_layers), ("decoder", num_decoder_layers)):
        mapping[f"{side}.embeddings.layer_norm"] = f"{side}.layernorm_embedding"
        for i in range(n):
            for ours, theirs in _BART_LAYER.items():
                if side == "encoder" and ours.startswith("cross_"):
                    continue
                mapping[f"{side}.stack.layers.{i}.{ours}"] = f"{side}.layers.{i}.{theirs}"
    return mapping


def bart_state_dict_to_hf(
    state: dict[str, torch.Tensor], num_encoder_layers: int, num_decoder_layers: int
) -> dict[str, torch.Tensor]:
    out = rename_state_keys(state, _bart_module_map(num_encoder_layers, num_decoder_layers))
    table = state["encoder.embeddings.word_embeddings.weight"]
    for key in ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
        out[key] = table
    for side in ("encoder", "decoder"):
        positions = state[f"{side}.embeddings.position_embeddings.weight"]  # P×H -> (P+2)×H
        out[f"{side}.embed_positions.weight"] = torch.cat(
            [positions.new_zeros(BART_POSITION_OFFSET, positions.shape[1]), positions]
        )
    return out


def bart_state_dict_from_hf(
    state: dict[str, torch.Tensor], num_encoder_layers: int, num_decoder_layers: int
) -> dict[str, torch.Tensor]:
    inverse = {theirs: ours for ours, theirs in _bart_module_map(num_encoder_layers, num_decoder_layers).items()}
    out = rename_state_keys(state, inverse)
    for side in ("encoder", "decoder"):
        out[f"{side}.embeddings.word_embeddings.weight"] = state["shared.weight"]
        out[f"{side}.embeddings.position_embeddings.weight"] = state[f"{side}.embed_positions.weight"][
            BART_POSITION_OFFSET:
        ]
    return out

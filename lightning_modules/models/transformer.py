"""Transformer backbones: a BERT-style bidirectional encoder and a GPT-2-style causal decoder.

The file reads top to bottom as building blocks, then the backbones made of them:

    TransformerEmbeddings   token + learned absolute position (+ token type) embeddings
    MultiHeadAttention      scaled dot-product attention; self-attention, or cross-attention
                            when given `key_value_states`; takes an additive mask; a long-sequence
                            `pattern` (models/attention/: sliding window, Longformer, BigBird,
                            Linformer) replaces its dense product when `attention` is not `full`
    FeedForward             dense -> activation -> dense
    PostLNLayer/PreLNLayer  one block: attention and feed-forward sub-layers with residuals
    TransformerLayerStack   runs a list of layers, collecting every hidden state (and attentions)
    TransformerBackbone     embeddings + stack (+ final LayerNorm), mask construction, init
    TransformerEncoder      BERT: bidirectional, post-LN by default, token types
    TransformerDecoder      GPT-2: causal, pre-LN by default, final LayerNorm

Variants subclass rather than branch on flags: a factorised-embedding model overrides
`build_embeddings`, cross-layer sharing overrides `build_layers` (returning the same module more
than once), a seq2seq decoder layer subclasses a layer and adds a cross-attention
`MultiHeadAttention`, and UniLM-style mixed masks pass `self_attention_mask` to `forward`.

Layer-norm placement follows one rule for both backbones: a post-LN stack normalises the
embedding output (BERT), a pre-LN stack normalises the last layer's output instead (GPT-2).

Weights convert to and from Hugging Face `BertModel` / `GPT2Model` (`to_hf`, `from_hf`), which the
parity tests and the pretrain stage's export use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import get_args

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.models.attention.bigbird import BigBirdAttention
from lightning_modules.models.attention.linformer import LinformerAttention
from lightning_modules.models.attention.longformer import LongformerAttention
from lightning_modules.models.attention.sliding_window import SlidingWindowAttention
from lightning_modules.models.base import Backbone, BackboneOutput
from ptmlab.contracts import BackboneError, ConfigError
from ptmlab.methods.fields import NODE
from ptmlab.methods.models import (
    AttentionName,
    TransformerDecoderParams,
    TransformerEncoderParams,
    long_attention_problem,
)

ACTIVATIONS = {
    "gelu": lambda: nn.GELU(),  # exact (erf) GELU, as BERT
    "gelu_new": lambda: nn.GELU(approximate="tanh"),  # GPT-2's tanh approximation
    "gelu_pytorch_tanh": lambda: nn.GELU(approximate="tanh"),
    "relu": lambda: nn.ReLU(),
    "silu": lambda: nn.SiLU(),
    "swish": lambda: nn.SiLU(),
}


def build_activation(name: str) -> nn.Module:
    if name not in ACTIVATIONS:
        raise ConfigError(f"model.backbone.activation={name!r} is not one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]()


# -- building blocks ------------------------------------------------------------------------------


class TransformerEmbeddings(nn.Module):
    """Sum of token, learned absolute position and (when type_vocab_size > 0) token-type
    embeddings, then LayerNorm (post-LN stacks only) and dropout."""

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        max_position_embeddings: int,
        type_vocab_size: int = 0,
        dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
        layer_norm: bool = True,
    ):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size) if type_vocab_size > 0 else None
        self.layer_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps) if layer_norm else None
        self.dropout = nn.Dropout(dropout)
        self.max_position_embeddings = max_position_embeddings

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        seq_len = input_ids.shape[1]
        if seq_len > self.max_position_embeddings:
            raise ConfigError(
                f"sequence length {seq_len} exceeds "
                f"model.backbone.max_position_embeddings={self.max_position_embeddings}"
            )
        if position_ids is None:
            position_ids = torch.arange(seq_len, device=input_ids.device).unsqueeze(0)  # 1×T
        x = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type_embeddings(token_type_ids)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return self.dropout(x)


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention.

    `attention_bias` is additive (0 where attention is allowed, a large negative number where it
    is not) or boolean (True where attention is allowed), broadcastable to B×heads×T_q×T_k. `is_causal=True` with no bias lets
    `scaled_dot_product_attention` use its fused causal kernels.
    Self-attention by default; pass `key_value_states` (B×S×H) for cross-attention.
    `pattern` (set by the backbone for an `attention` other than `full`) computes the context from
    the split heads instead; it takes a boolean B×1×1×T key mask and applies causality itself.
    """

    def __init__(self, hidden_size: int, num_heads: int, attention_dropout: float = 0.1, dropout: float = 0.1):
        super().__init__()
        if hidden_size % num_heads != 0:
            raise ConfigError(
                f"model.backbone.hidden_size={hidden_size} is not divisible by model.backbone.num_heads={num_heads}"
            )
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.output = nn.Linear(hidden_size, hidden_size)
        self.attention_dropout = attention_dropout
        self.output_dropout = nn.Dropout(dropout)
        self.pattern: nn.Module | None = None

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)  # B×T×H -> B×heads×T×d

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_bias: torch.Tensor | None = None,
        is_causal: bool = False,
        output_attentions: bool = False,
        key_value_states: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        kv = hidden_states if key_value_states is None else key_value_states
        q = self._split_heads(self.query(hidden_states))
        k = self._split_heads(self.key(kv))
        v = self._split_heads(self.value(kv))
        dropout_p = self.attention_dropout if self.training else 0.0
        probs = None
        if self.pattern is not None:
            if output_attentions:
                raise BackboneError(
                    f"{type(self.pattern).__name__} computes no T×T attention map: output_attentions needs "
                    "model.backbone.attention=full"
                )
            context = self.pattern(q, k, v, attention_bias, is_causal, dropout_p)
        elif output_attentions:
            # SDPA does not return the weights, so compute them explicitly on request.
            if attention_bias is not None and attention_bias.dtype == torch.bool:
                attention_bias = allowed_to_bias(attention_bias, q.dtype)
            if is_causal:
                attention_bias = _combine_bias(attention_bias, causal_bias(q.shape[2], k.shape[2], q))
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)  # B×heads×T_q×T_k
            if attention_bias is not None:
                scores = scores + attention_bias
            probs = scores.softmax(dim=-1)
            context = F.dropout(probs, dropout_p, self.training) @ v  # B×heads×T_q×d
        else:
            context = F.scaled_dot_product_attention(
                q, k, v, attn_mask=attention_bias, dropout_p=dropout_p, is_causal=is_causal and attention_bias is None
            )
        b, _, t, _ = context.shape
        context = context.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim)  # B×heads×T×d -> B×T×H
        return self.output_dropout(self.output(context)), probs


def init_weights(module: nn.Module, initializer_range: float = 0.02) -> None:
    """BERT/GPT-2/XLNet initialisation, for `model.apply`: N(0, initializer_range) weights, zero
    biases, unit LayerNorm."""
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=initializer_range)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class FeedForward(nn.Module):
    """Position-wise feed-forward: H -> intermediate -> H."""

    def __init__(self, hidden_size: int, intermediate_size: int, activation: str = "gelu", dropout: float = 0.1):
        super().__init__()
        self.dense_in = nn.Linear(hidden_size, intermediate_size)
        self.activation = build_activation(activation)
        self.dense_out = nn.Linear(intermediate_size, hidden_size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.dense_out(self.activation(self.dense_in(x))))


class PostLNLayer(nn.Module):
    """BERT's block: x = LN(x + Attn(x)); x = LN(x + FFN(x))."""

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        intermediate_size: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
        activation: str = "gelu",
    ):
        super().__init__()
        self.attention = MultiHeadAttention(hidden_size, num_heads, attention_dropout, dropout)
        self.attention_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.feed_forward = FeedForward(hidden_size, intermediate_size, activation, dropout)
        self.feed_forward_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        attention_bias: torch.Tensor | None = None,
        is_causal: bool = False,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, probs = self.attention(x, attention_bias, is_causal, output_attentions)
        x = self.attention_norm(x + attended)
        x = self.feed_forward_norm(x + self.feed_forward(x))
        return x, probs


class PreLNLayer(PostLNLayer):
    """GPT-2's block: x = x + Attn(LN(x)); x = x + FFN(LN(x)). Same parameters as PostLNLayer."""

    def forward(
        self,
        x: torch.Tensor,
        attention_bias: torch.Tensor | None = None,
        is_causal: bool = False,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, probs = self.attention(self.attention_norm(x), attention_bias, is_causal, output_attentions)
        x = x + attended
        x = x + self.feed_forward(self.feed_forward_norm(x))
        return x, probs


class TransformerLayerStack(nn.Module):
    """Runs layers in order. The list may hold the same module more than once (cross-layer
    parameter sharing); every application still contributes its own hidden state."""

    def __init__(self, layers: list[nn.Module]):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(
        self,
        x: torch.Tensor,
        attention_bias: torch.Tensor | None = None,
        is_causal: bool = False,
        output_attentions: bool = False,
        **layer_kwargs,
    ):
        """`layer_kwargs` go to every layer as they are (a cross-attention decoder layer takes the
        encoder's states and their bias this way)."""
        hidden_states = [x]
        attentions = [] if output_attentions else None
        for layer in self.layers:
            x, probs = layer(x, attention_bias, is_causal, output_attentions, **layer_kwargs)
            hidden_states.append(x)
            if attentions is not None:
                attentions.append(probs)
        return hidden_states, attentions


# -- masks ----------------------------------------------------------------------------------------

# Additive bias for a forbidden query-key pair. Finite and representable in float16/bfloat16 (as
# original BERT's -10000), so under mixed precision a fully masked row (a padding query under
# left padding) stays finite instead of -inf -> NaN, and NaN never leaks into later layers.
# exp(-1e4) underflows to exactly 0, so allowed positions see the same softmax as with -inf.
MASKED_BIAS = -1.0e4

# model.backbone.attention, as declared; a causal decoder takes only those that never see the future.
ATTENTION_PATTERNS: tuple[str, ...] = get_args(AttentionName)
CAUSAL_ATTENTION_PATTERNS = ("full", "sliding_window")


def causal_bias(q_len: int, k_len: int, like: torch.Tensor) -> torch.Tensor:
    """Additive 1×1×T_q×T_k bias forbidding attention to later positions."""
    allowed = torch.ones(q_len, k_len, dtype=torch.bool, device=like.device).tril(diagonal=k_len - q_len)
    return allowed_to_bias(allowed[None, None], like.dtype)


def allowed_to_bias(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Boolean "may attend" mask -> additive bias (0 or MASKED_BIAS)."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, MASKED_BIAS)


def _combine_bias(a: torch.Tensor | None, b: torch.Tensor) -> torch.Tensor:
    if a is None:
        return b
    return (a + b).clamp(min=MASKED_BIAS)


# -- backbones ------------------------------------------------------------------------------------


class TransformerBackbone(Backbone):
    """Embeddings + a stack of layers (+ a final LayerNorm for pre-LN stacks).

    forward(input_ids B×T, attention_mask B×T (1 = token, 0 = pad), token_type_ids B×T,
            output_attentions, self_attention_mask B×T×T or B×1×T×T boolean (True = may attend),
            position_ids B×T)
    `self_attention_mask` is combined (AND) with padding and, for causal backbones, the causal mask;
    variants with per-batch masks (UniLM's bidirectional / left-to-right / seq2seq) pass it.
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int = 128,
        num_layers: int = 2,
        num_heads: int = 2,
        intermediate_size: int = 512,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 0,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        pre_layer_norm: bool = False,
        layer_norm_eps: float = 1e-12,
        activation: str = "gelu",
        initializer_range: float = 0.02,
        attention: str = "full",
        attention_window: int = 128,
        global_tokens: Sequence[int] = (0,),
        block_size: int = 64,
        num_random_blocks: int = 3,
        projected_length: int = 128,
    ):
        super().__init__()
        for key, value in {
            "vocab_size": vocab_size,
            "hidden_size": hidden_size,
            "num_layers": num_layers,
            "num_heads": num_heads,
            "intermediate_size": intermediate_size,
            "max_position_embeddings": max_position_embeddings,
        }.items():
            if int(value) <= 0:
                raise ConfigError(f"model.backbone.{key}={value} must be a positive integer")
        self.vocab_size, self.hidden_size, self.num_layers = int(vocab_size), int(hidden_size), int(num_layers)
        self.num_heads, self.intermediate_size = int(num_heads), int(intermediate_size)
        self.max_position_embeddings, self.type_vocab_size = int(max_position_embeddings), int(type_vocab_size)
        self.dropout, self.attention_dropout = float(dropout), float(attention_dropout)
        self.pre_layer_norm = bool(pre_layer_norm)
        self.layer_norm_eps, self.activation = float(layer_norm_eps), str(activation)
        self.initializer_range = float(initializer_range)
        build_activation(self.activation)  # fail on a bad name before building anything
        self.attention = str(attention)
        self.attention_window, self.global_tokens = int(attention_window), tuple(int(i) for i in global_tokens)
        self.block_size, self.num_random_blocks = int(block_size), int(num_random_blocks)
        self.projected_length = int(projected_length)
        self.check_attention()

        self.embeddings = self.build_embeddings()
        self.stack = TransformerLayerStack(self.build_layers())
        self.final_layer_norm = nn.LayerNorm(self.hidden_size, eps=self.layer_norm_eps) if self.pre_layer_norm else None
        self.apply(self._init_weights)

    # -- hooks for variants ------------------------------------------------------------------
    def build_embeddings(self) -> nn.Module:
        return TransformerEmbeddings(
            self.vocab_size,
            self.hidden_size,
            self.max_position_embeddings,
            self.type_vocab_size,
            self.dropout,
            self.layer_norm_eps,
            layer_norm=not self.pre_layer_norm,
        )

    @property
    def layer_class(self) -> type[PostLNLayer]:
        return PreLNLayer if self.pre_layer_norm else PostLNLayer

    def build_layer(self) -> nn.Module:
        layer = self.layer_class(
            self.hidden_size,
            self.num_heads,
            self.intermediate_size,
            self.dropout,
            self.attention_dropout,
            self.layer_norm_eps,
            self.activation,
        )
        layer.attention.pattern = self.build_attention_pattern()
        return layer

    def build_layers(self) -> list[nn.Module]:
        return [self.build_layer() for _ in range(self.num_layers)]

    def check_attention(self) -> None:
        """The declaration's check (ptmlab.methods.models), for a backbone built without a config."""
        allowed = CAUSAL_ATTENTION_PATTERNS if self.is_causal else ATTENTION_PATTERNS
        if self.attention not in allowed:
            raise ConfigError(f"model.backbone.attention={self.attention!r} is not one of {', '.join(allowed)}")
        problem = long_attention_problem(
            self.attention,
            self.max_position_embeddings,
            self.attention_window,
            self.global_tokens,
            self.block_size,
            self.projected_length,
        )
        if problem:
            raise ConfigError(problem.replace(NODE, "model.backbone"))

    def build_attention_pattern(self) -> nn.Module | None:
        """One layer's long-sequence pattern (each layer its own: Linformer's E and F are weights),
        or None for full attention."""
        if self.attention == "sliding_window":
            return SlidingWindowAttention(self.attention_window)
        if self.attention == "longformer":
            return LongformerAttention(self.attention_window, self.global_tokens)
        if self.attention == "bigbird":
            return BigBirdAttention(self.block_size, self.num_random_blocks, self.num_heads, self.global_tokens)
        if self.attention == "linformer":
            return LinformerAttention(self.max_position_embeddings, self.projected_length)
        return None

    def _init_weights(self, module: nn.Module) -> None:
        init_weights(module, self.initializer_range)

    # -- forward -----------------------------------------------------------------------------
    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def attention_bias(
        self,
        attention_mask: torch.Tensor | None,
        self_attention_mask: torch.Tensor | None,
        seq_len: int,
        dtype: torch.dtype,
    ) -> torch.Tensor | None:
        """Additive bias B×1×T×T (or B×1×1×T for padding alone), or None when nothing is masked
        beyond causality (then SDPA's own causal path is used)."""
        if attention_mask is None and self_attention_mask is None:
            return None
        allowed = None
        if attention_mask is not None:
            allowed = attention_mask.bool()[:, None, None, :]  # B×T -> B×1×1×T (keys)
        if self_attention_mask is not None:
            extra = self_attention_mask.bool()
            if extra.dim() == 3:
                extra = extra[:, None]  # B×T×T -> B×1×T×T
            if extra.dim() != 4 or extra.shape[-2:] != (seq_len, seq_len):
                raise ValueError(
                    f"self_attention_mask must be B×T×T or B×1×T×T with T={seq_len}, "
                    f"got {tuple(self_attention_mask.shape)}"
                )
            allowed = extra if allowed is None else allowed & extra
        if self.is_causal:
            causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=allowed.device).tril()
            allowed = allowed & causal[None, None]  # -> B×1×T×T
        return allowed_to_bias(allowed, dtype)

    def layer_attention_mask(
        self,
        attention_mask: torch.Tensor | None,
        self_attention_mask: torch.Tensor | None,
        seq_len: int,
        dtype: torch.dtype,
    ) -> torch.Tensor | None:
        """What the layers attend with: when padding is all that is masked (a bidirectional
        backbone, no `self_attention_mask`), a boolean key mask B×1×1×T (True = may attend), the
        form scaled_dot_product_attention takes for key padding without a float bias to build
        and read (issue 28); otherwise `attention_bias`'s additive bias. A long-sequence pattern takes
        the key mask alone (B×1×1×T or None), never a dense T×T one, and applies causality itself."""
        if self.attention != "full":
            if self_attention_mask is not None:
                raise ConfigError(
                    f"model.backbone.attention={self.attention} takes padding and causality only, "
                    "not a per-batch self_attention_mask (use attention=full)"
                )
            return None if attention_mask is None else attention_mask.bool()[:, None, None, :]  # B×T -> B×1×1×T
        if attention_mask is None or self_attention_mask is not None or self.is_causal:
            return self.attention_bias(attention_mask, self_attention_mask, seq_len, dtype)
        keys = attention_mask.bool()
        # A row of padding only (no key to attend to) attends to every key, as it does under the
        # additive bias (the same -1e4 on every key leaves the softmax unchanged), instead of the
        # NaN a boolean mask gives a query with no allowed key. No branch, so no host sync.
        keys = keys | ~keys.any(dim=-1, keepdim=True)
        return keys[:, None, None, :]  # B×T -> B×1×1×T

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        self_attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> BackboneOutput:
        x = self.embeddings(input_ids, token_type_ids=token_type_ids, position_ids=position_ids)
        bias = self.layer_attention_mask(attention_mask, self_attention_mask, input_ids.shape[1], x.dtype)
        # A long-sequence pattern applies causality itself, beside the key mask it gets as `bias`.
        is_causal = self.is_causal and (bias is None or self.attention != "full")
        hidden_states, attentions = self.stack(x, bias, is_causal=is_causal, output_attentions=output_attentions)
        if self.final_layer_norm is not None:
            hidden_states[-1] = self.final_layer_norm(hidden_states[-1])
        return BackboneOutput(
            hidden_states=tuple(hidden_states), attentions=tuple(attentions) if attentions is not None else None
        )

    # -- Hugging Face conversion -----------------------------------------------------------------
    def to_hf(self):
        """The same weights as a Hugging Face model, or None where there is no counterpart."""
        return None


class TransformerEncoder(TransformerBackbone):
    """BERT (Devlin et al. 2019): bidirectional self-attention, post-LN, token-type embeddings."""

    declaration = TransformerEncoderParams

    family = "encoder"
    is_causal = False

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
        attention: str = "full",
        attention_window: int = 128,
        global_tokens: Sequence[int] = (0,),
        block_size: int = 64,
        num_random_blocks: int = 3,
        projected_length: int = 128,
    ):
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
            attention,
            attention_window,
            global_tokens,
            block_size,
            num_random_blocks,
            projected_length,
        )

    def to_hf(self):
        """The same weights as a Hugging Face `BertModel` (no pooler), or None where BERT has no
        counterpart (a pre-LN encoder, a long-sequence attention pattern)."""
        if (
            self.attention != "full"
            or self.pre_layer_norm
            or self.type_vocab_size == 0
            or self.activation not in ("gelu", "gelu_new", "relu")
        ):
            return None
        from transformers import BertConfig, BertModel

        model = BertModel(BertConfig(**bert_config_fields(self)), add_pooling_layer=False)
        model.load_state_dict(bert_state_dict_to_hf(self.state_dict()), strict=True)
        return model.eval()

    @classmethod
    def from_hf(cls, model) -> TransformerEncoder:
        """Build from a Hugging Face `BertModel` (its config and weights; a pooler is ignored)."""
        c = model.config
        encoder = cls(**bert_arguments_from_hf(c), pre_layer_norm=False)
        encoder.load_state_dict(bert_state_dict_from_hf(model.state_dict(), c.num_hidden_layers), strict=True)
        return encoder


class TransformerDecoder(TransformerBackbone):
    """GPT-2 (Radford et al. 2019): causal self-attention, pre-LN, a final LayerNorm, no token
    types (`token_type_ids` is accepted and ignored, so batches built for encoders still work)."""

    declaration = TransformerDecoderParams

    family = "decoder"
    is_causal = True

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int = 128,
        num_layers: int = 2,
        num_heads: int = 2,
        intermediate_size: int = 512,
        max_position_embeddings: int = 1024,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        pre_layer_norm: bool = True,
        layer_norm_eps: float = 1e-5,
        activation: str = "gelu_new",
        initializer_range: float = 0.02,
        attention: str = "full",
        attention_window: int = 128,
        global_tokens: Sequence[int] = (0,),
        block_size: int = 64,
        num_random_blocks: int = 3,
        projected_length: int = 128,
    ):
        super().__init__(
            vocab_size,
            hidden_size,
            num_layers,
            num_heads,
            intermediate_size,
            max_position_embeddings,
            0,
            dropout,
            attention_dropout,
            pre_layer_norm,
            layer_norm_eps,
            activation,
            initializer_range,
            attention,
            attention_window,
            global_tokens,
            block_size,
            num_random_blocks,
            projected_length,
        )
        # GPT-2 scales the residual output projections by 1/sqrt(2·L) at initialisation.
        for layer in self.stack.layers:
            for proj in (layer.attention.output, layer.feed_forward.dense_out):
                nn.init.normal_(proj.weight, mean=0.0, std=self.initializer_range / math.sqrt(2 * self.num_layers))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        self_attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> BackboneOutput:
        return super().forward(input_ids, attention_mask, None, output_attentions, self_attention_mask, position_ids)

    def to_hf(self):
        """The same weights as a Hugging Face `GPT2Model`, or None where GPT-2 has no counterpart
        (a post-LN decoder, a sliding window)."""
        if self.attention != "full" or not self.pre_layer_norm or self.activation not in ("gelu_new", "gelu", "relu"):
            return None
        from transformers import GPT2Config, GPT2Model

        config = GPT2Config(
            vocab_size=self.vocab_size,
            n_positions=self.max_position_embeddings,
            n_embd=self.hidden_size,
            n_layer=self.num_layers,
            n_head=self.num_heads,
            n_inner=self.intermediate_size,
            activation_function=self.activation,
            resid_pdrop=self.dropout,
            embd_pdrop=self.dropout,
            attn_pdrop=self.attention_dropout,
            layer_norm_epsilon=self.layer_norm_eps,
            initializer_range=self.initializer_range,
            bos_token_id=None,
            eos_token_id=None,
        )
        model = GPT2Model(config)
        model.load_state_dict(gpt2_state_dict_to_hf(self.state_dict(), self.num_layers), strict=True)
        return model.eval()

    def to_hf_generator(self):
        """`GPT2LMHeadModel` over `to_hf()`'s weights, its LM head the token table (tied, as the
        causal generation task model projects: heads/causal_generation_model.py), or None."""
        base = self.to_hf()
        if base is None:
            return None
        from transformers import GPT2LMHeadModel

        model = GPT2LMHeadModel(base.config)
        model.transformer.load_state_dict(base.state_dict(), strict=True)
        model.lm_head.weight = model.transformer.wte.weight
        return model.eval()

    def hf_generator_linears(self) -> dict[str, list[str]]:
        out = {}
        for i in range(self.num_layers):
            ours, theirs = f"stack.layers.{i}", f"transformer.h.{i}"
            out[f"{theirs}.attn.c_attn"] = [f"{ours}.attention.{n}" for n in ("query", "key", "value")]
            out.update({f"{theirs}.{t}": [f"{ours}.{o}"] for o, t in _GPT2_LAYER.items()})
        return out

    @classmethod
    def from_hf(cls, model) -> TransformerDecoder:
        """Build from a Hugging Face `GPT2Model` (its config and weights)."""
        c = model.config
        if getattr(c, "scale_attn_by_inverse_layer_idx", False) or getattr(c, "reorder_and_upcast_attn", False):
            raise BackboneError(
                "GPT2 configs with scale_attn_by_inverse_layer_idx/reorder_and_upcast_attn "
                "have no TransformerDecoder counterpart"
            )
        decoder = cls(
            vocab_size=c.vocab_size,
            hidden_size=c.n_embd,
            num_layers=c.n_layer,
            num_heads=c.n_head,
            intermediate_size=c.n_inner or 4 * c.n_embd,
            max_position_embeddings=c.n_positions,
            dropout=c.resid_pdrop,
            attention_dropout=c.attn_pdrop,
            pre_layer_norm=True,
            layer_norm_eps=c.layer_norm_epsilon,
            activation=c.activation_function,
            initializer_range=c.initializer_range,
        )
        decoder.load_state_dict(gpt2_state_dict_from_hf(model.state_dict(), c.n_layer), strict=True)
        return decoder


# -- state-dict mappings ----------------------------------------------------------------------------

_BERT_EMBEDDINGS = {
    "embeddings.word_embeddings": "embeddings.word_embeddings",
    "embeddings.position_embeddings": "embeddings.position_embeddings",
    "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings.layer_norm": "embeddings.LayerNorm",
}
_BERT_LAYER = {
    "attention.query": "attention.self.query",
    "attention.key": "attention.self.key",
    "attention.value": "attention.self.value",
    "attention.output": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "feed_forward.dense_in": "intermediate.dense",
    "feed_forward.dense_out": "output.dense",
    "feed_forward_norm": "output.LayerNorm",
}


def _bert_key_map(num_layers: int) -> dict[str, str]:
    """ours -> Hugging Face BertModel module names."""
    mapping = dict(_BERT_EMBEDDINGS)
    for i in range(num_layers):
        for ours, theirs in _BERT_LAYER.items():
            mapping[f"stack.layers.{i}.{ours}"] = f"encoder.layer.{i}.{theirs}"
    return mapping


# Our encoder's constructor argument -> the field of Hugging Face's BertConfig (ElectraConfig and
# AlbertConfig name them alike): every BERT-style to_hf and from_hf reads this one table.
BERT_CONFIG_FIELDS = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "activation": "hidden_act",
    "dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "max_position_embeddings": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "layer_norm_eps": "layer_norm_eps",
    "initializer_range": "initializer_range",
}


def bert_config_fields(backbone: TransformerBackbone) -> dict:
    """The BertConfig-style fields of `backbone` (its settings under Hugging Face's names)."""
    return {theirs: getattr(backbone, ours) for ours, theirs in BERT_CONFIG_FIELDS.items()}


def bert_arguments_from_hf(config) -> dict:
    """Our constructor's arguments from a BertConfig-style Hugging Face config."""
    return {ours: getattr(config, theirs) for ours, theirs in BERT_CONFIG_FIELDS.items()}


def rename_state_keys(state: dict[str, torch.Tensor], module_map: dict[str, str]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state.items():
        module, _, param = key.rpartition(".")
        if module in module_map:
            out[f"{module_map[module]}.{param}"] = value
    return out


def bert_state_dict_to_hf(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    num_layers = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("stack.layers."))
    return rename_state_keys(state, _bert_key_map(num_layers))


def bert_state_dict_from_hf(state: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    inverse = {theirs: ours for ours, theirs in _bert_key_map(num_layers).items()}
    return rename_state_keys({k: v for k, v in state.items() if not k.startswith("pooler.")}, inverse)


# GPT-2 stores Conv1D weights as in×out (the transpose of nn.Linear) and fuses q, k, v in c_attn.
_GPT2_LAYER = {
    "attention_norm": "ln_1",
    "attention.output": "attn.c_proj",
    "feed_forward_norm": "ln_2",
    "feed_forward.dense_in": "mlp.c_fc",
    "feed_forward.dense_out": "mlp.c_proj",
}


def _gpt2_param_map(num_layers: int) -> dict[str, str]:
    """ours -> GPT2Model parameter names, for every tensor but q, k, v (fused in c_attn)."""
    mapping = {
        "embeddings.word_embeddings.weight": "wte.weight",
        "embeddings.position_embeddings.weight": "wpe.weight",
        "final_layer_norm.weight": "ln_f.weight",
        "final_layer_norm.bias": "ln_f.bias",
    }
    for i in range(num_layers):
        for ours, theirs in _GPT2_LAYER.items():
            for param in ("weight", "bias"):
                mapping[f"stack.layers.{i}.{ours}.{param}"] = f"h.{i}.{theirs}.{param}"
    return mapping


def _conv1d_transposed(hf_name: str, tensor: torch.Tensor) -> torch.Tensor:
    """A layer's 2-D weight transposed (Conv1D's in×out <-> Linear's out×in, its own inverse);
    embeddings, norms and biases as they are."""
    return tensor.t().contiguous() if hf_name.startswith("h.") and tensor.dim() == 2 else tensor


def gpt2_state_dict_from_hf(state: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    out = {ours: _conv1d_transposed(theirs, state[theirs]) for ours, theirs in _gpt2_param_map(num_layers).items()}
    for i in range(num_layers):
        qkv_w = state[f"h.{i}.attn.c_attn.weight"].t()  # H×3H -> 3H×H
        qkv_b = state[f"h.{i}.attn.c_attn.bias"]
        for j, name in enumerate(("query", "key", "value")):
            out[f"stack.layers.{i}.attention.{name}.weight"] = qkv_w.chunk(3, dim=0)[j].contiguous()
            out[f"stack.layers.{i}.attention.{name}.bias"] = qkv_b.chunk(3)[j].contiguous()
    return out


def gpt2_state_dict_to_hf(state: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    out = {theirs: _conv1d_transposed(theirs, state[ours]) for ours, theirs in _gpt2_param_map(num_layers).items()}
    for i in range(num_layers):
        attention = f"stack.layers.{i}.attention"
        qkv_w = torch.cat([state[f"{attention}.{n}.weight"] for n in ("query", "key", "value")], dim=0)
        out[f"h.{i}.attn.c_attn.weight"] = qkv_w.t().contiguous()  # 3H×H -> H×3H
        out[f"h.{i}.attn.c_attn.bias"] = torch.cat([state[f"{attention}.{n}.bias"] for n in ("query", "key", "value")])
    return out

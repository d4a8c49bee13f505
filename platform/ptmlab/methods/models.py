"""`model.backbone`: one declaration per backbone class (lightning_modules/models/, constructor
arguments)."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from ptmlab.methods.fields import NODE, Dropout, Name, NonNegativeInt, PositiveFloat, PositiveInt, TargetNode

# lightning_modules/models/transformer.py ACTIVATIONS
Activation = Literal["gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish"]


def heads_divide(node, hidden: str = "hidden_size", heads: str = "num_heads") -> None:
    h, n = getattr(node, hidden), getattr(node, heads)
    if h % n:
        raise ValueError(f"{NODE}.{heads}={n} does not divide {NODE}.{hidden}={h}")


class TransformerParams(TargetNode):
    """Shared by every ptmlab Transformer (lightning_modules/models/transformer.py)."""

    vocab_size: PositiveInt  # `${tokenizer.vocab_size}`; the stage passes the trained size
    hidden_size: PositiveInt = 128
    num_layers: PositiveInt = 2
    num_heads: PositiveInt = 2
    intermediate_size: PositiveInt = 512
    dropout: Dropout = 0.1
    layer_norm_eps: PositiveFloat = 1e-12
    initializer_range: PositiveFloat = 0.02

    @model_validator(mode="after")
    def _heads(self):
        heads_divide(self)
        return self


# lightning_modules/models/attention/: one file per pattern; "full" is MultiHeadAttention's own SDPA.
AttentionName = Literal["full", "sliding_window", "longformer", "bigbird", "linformer"]


def long_attention_problem(
    attention: str,
    max_position_embeddings: int,
    attention_window: int,
    global_tokens: list[int] | tuple[int, ...],
    block_size: int,
    projected_length: int,
) -> str | None:
    """What is wrong with a long-sequence attention setting against the model's positions, or None.
    The declaration's validator and the backbone's constructor (built without a config in tests and
    benchmarks) both ask this one function; keys are named relative to `{node}`."""
    limit = f"{NODE}.max_position_embeddings={max_position_embeddings}"
    if attention in ("sliding_window", "longformer") and attention_window > max_position_embeddings:
        return f"{NODE}.attention_window={attention_window} exceeds {limit}"
    if attention == "bigbird" and block_size > max_position_embeddings:
        return f"{NODE}.block_size={block_size} exceeds {limit}"
    if attention == "linformer" and projected_length > max_position_embeddings:
        return f"{NODE}.projected_length={projected_length} exceeds {limit}"
    outside = [i for i in global_tokens if not 0 <= i < max_position_embeddings]
    if attention in ("longformer", "bigbird") and outside:
        return f"{NODE}.global_tokens={list(global_tokens)}: index {outside[0]} is outside the {limit} positions"
    return None


class LongAttentionParams(TransformerParams):
    """The self-attention pattern of ptmlab's own Transformer (docs/guide/pretraining.md, "Long sequences").
    Each key is read only by the patterns named beside it; `full` reads none."""

    max_position_embeddings: PositiveInt = 512
    attention: AttentionName = "full"
    attention_window: PositiveInt = 128  # sliding_window, longformer: one-sided, |i - j| <= window
    global_tokens: list[NonNegativeInt] = [0]  # longformer, bigbird: positions that see and are seen by all
    block_size: PositiveInt = 64  # bigbird: each block attends its own, both neighbours, random blocks
    num_random_blocks: NonNegativeInt = 3  # bigbird: per query block and head, drawn with a fixed seed
    projected_length: PositiveInt = 128  # linformer: k, the length keys and values are projected to

    @model_validator(mode="after")
    def _attention_fits(self):
        problem = long_attention_problem(
            self.attention,
            self.max_position_embeddings,
            self.attention_window,
            self.global_tokens,
            self.block_size,
            self.projected_length,
        )
        if problem:
            raise ValueError(problem)
        return self


class BertStyleParams(TransformerParams):
    """The encoder fields BERT and UniLM share."""

    max_position_embeddings: PositiveInt = 512
    type_vocab_size: NonNegativeInt = 2
    attention_dropout: Dropout = 0.1
    pre_layer_norm: bool = False
    activation: Activation = "gelu"


class TransformerEncoderParams(LongAttentionParams, BertStyleParams):
    pass


class TransformerDecoderParams(LongAttentionParams):
    # Global tokens and Linformer's projection over the whole sequence would let a position see the
    # future, so a causal decoder takes full attention or a window over the past only.
    attention: Literal["full", "sliding_window"] = "full"
    layer_norm_eps: PositiveFloat = 1e-5  # GPT-2's
    max_position_embeddings: PositiveInt = 1024
    attention_dropout: Dropout = 0.1
    pre_layer_norm: bool = True
    activation: Activation = "gelu_new"


class UnilmEncoderParams(BertStyleParams):
    """UniLM's masks are dense per-batch T×T masks: full attention only (no long-attention keys)."""

    mode: Literal["bidirectional", "left_to_right", "right_to_left", "seq2seq"] = "bidirectional"


class FactorisedEncoderParams(TransformerParams):
    """ALBERT and ELECTRA: an E-wide token table projected to H; post-LN only (no pre_layer_norm)."""

    embedding_size: PositiveInt = 128
    max_position_embeddings: PositiveInt = 512
    type_vocab_size: NonNegativeInt = 2
    attention_dropout: Dropout = 0.0
    activation: Activation = "gelu"


class AlbertEncoderParams(FactorisedEncoderParams):
    dropout: Dropout = 0.0  # ALBERT v2's: no dropout
    sharing: Literal["all", "attention", "ffn", "none"] = "all"


class ElectraPairParams(FactorisedEncoderParams):
    # The discriminator's defaults (lightning_modules/models/electra.py): ELECTRA-small's depth
    hidden_size: PositiveInt = 256
    num_layers: PositiveInt = 12
    num_heads: PositiveInt = 4
    intermediate_size: PositiveInt = 1024
    attention_dropout: Dropout = 0.1
    generator_hidden_size: PositiveInt = 64
    generator_num_layers: PositiveInt | None = None  # null: as many as the discriminator
    generator_num_heads: PositiveInt = 1
    generator_intermediate_size: PositiveInt = 256

    @model_validator(mode="after")
    def _generator(self):
        heads_divide(self, "generator_hidden_size", "generator_num_heads")
        if self.generator_hidden_size > self.hidden_size:
            # The paper's finding: a generator as wide as the discriminator makes RTD too hard.
            raise ValueError(
                f"{NODE}.generator_hidden_size={self.generator_hidden_size} must not exceed "
                f"{NODE}.hidden_size={self.hidden_size}"
            )
        return self


class TransformerEncoderDecoderParams(TransformerParams):
    num_decoder_layers: PositiveInt | None = None  # null: as many as the encoder
    max_position_embeddings: PositiveInt = 512
    attention_dropout: Dropout = 0.1
    pre_layer_norm: bool = False
    activation: Activation = "gelu"
    layer_norm_eps: PositiveFloat = 1e-5


class T5EncoderDecoderParams(TransformerParams):
    """Relative position buckets (no max_position_embeddings), ReLU and pre-RMSNorm fixed."""

    num_decoder_layers: PositiveInt | None = None
    layer_norm_eps: PositiveFloat = 1e-6


class XLNetEncoderParams(TransformerParams):
    """Relative positions (no max_position_embeddings), no token-type table."""

    attention_dropout: Dropout = 0.1
    activation: Activation = "gelu"


class BidirectionalLSTMLMParams(TargetNode):
    vocab_size: PositiveInt
    embedding_size: PositiveInt = 128
    hidden_size: PositiveInt = 256
    projection_size: NonNegativeInt | None = None  # null or 0: no projection
    num_layers: PositiveInt = 2
    dropout: Dropout = 0.1
    residual: bool = True
    initializer_range: PositiveFloat = 0.1

    @model_validator(mode="after")
    def _projection(self):
        if self.projection_size and self.projection_size >= self.hidden_size:
            raise ValueError(
                f"{NODE}.projection_size={self.projection_size} must be smaller than "
                f"{NODE}.hidden_size={self.hidden_size} (or null for no projection)"
            )
        return self


class HFBackboneParams(TargetNode):
    name_or_path: Name
    pretrained: bool = True
    vocab_size: PositiveInt | None = None
    attn_implementation: Name = (
        "sdpa"  # Hugging Face's own names (sdpa, eager, ...): it checks them; maps asked for switch to eager
    )


BACKBONES = {
    "lightning_modules.models.transformer.TransformerEncoder": TransformerEncoderParams,
    "lightning_modules.models.transformer.TransformerDecoder": TransformerDecoderParams,
    "lightning_modules.models.unilm.UnilmEncoder": UnilmEncoderParams,
    "lightning_modules.models.albert.AlbertEncoder": AlbertEncoderParams,
    "lightning_modules.models.electra.ElectraPair": ElectraPairParams,
    "lightning_modules.models.encoder_decoder.TransformerEncoderDecoder": TransformerEncoderDecoderParams,
    "lightning_modules.models.t5.T5EncoderDecoder": T5EncoderDecoderParams,
    "lightning_modules.models.xlnet.XLNetEncoder": XLNetEncoderParams,
    "lightning_modules.models.lstm.BidirectionalLSTMLM": BidirectionalLSTMLMParams,
    "lightning_modules.models.hf.HFBackbone": HFBackboneParams,
}

"""ALBERT (Lan et al. 2020): the BERT encoder with two parameter-reduction options, `family: encoder`.

- Factorised embedding parameterisation: tokens (and positions, token types) are embedded in a
  small space E, then one E×H projection lifts them to the hidden width H, so the vocabulary
  costs V·E + E·H parameters instead of V·H. `get_input_embeddings()` is the V×E table, so an
  MLM head tied to it predicts through E (the MLM head maps H -> E first).
- Cross-layer parameter sharing, `sharing`:
      all        one layer applied L times (ALBERT's default)
      attention  the self-attention sub-layer (Q, K, V, output projection) shared, FFN per layer
      ffn        the feed-forward sub-layer shared, attention per layer
      none       nothing shared (factorised embeddings only)
  LayerNorms stay with their layer under `attention`/`ffn` and are shared only under `all`.

Every application of a shared layer still yields its own hidden state, so `hidden_states` has
L+1 entries as for BERT. `FactorisedEmbeddingEncoder` (no sharing) is reused by ELECTRA.
With sharing=all the weights convert to and from Hugging Face `AlbertModel` (`to_hf`/`from_hf`).
"""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.models.transformer import (
    TransformerEmbeddings,
    TransformerEncoder,
    bert_arguments_from_hf,
    bert_config_fields,
    rename_state_keys,
)
from ptmlab.contracts import BackboneError, ConfigError
from ptmlab.methods.models import AlbertEncoderParams

SHARING_MODES = ("all", "attention", "ffn", "none")


class FactorisedEmbeddings(TransformerEmbeddings):
    """TransformerEmbeddings of width E (LayerNorm and dropout at E), then an E×H projection.
    `projection=False` (ELECTRA with E = H) leaves the E-wide output as it is."""

    def __init__(
        self,
        vocab_size: int,
        embedding_size: int,
        hidden_size: int,
        max_position_embeddings: int,
        type_vocab_size: int = 2,
        dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
        projection: bool = True,
    ):
        super().__init__(
            vocab_size,
            embedding_size,
            max_position_embeddings,
            type_vocab_size,
            dropout,
            layer_norm_eps,
            layer_norm=True,
        )
        self.projection = nn.Linear(embedding_size, hidden_size) if projection else None

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = super().forward(input_ids, token_type_ids, position_ids)
        return self.projection(x) if self.projection is not None else x  # B×T×E -> B×T×H


class FactorisedEmbeddingEncoder(TransformerEncoder):
    """A post-LN BERT encoder whose embeddings are factorised (E, then E×H)."""

    always_project = True  # ALBERT projects even when E = H; ELECTRA only when E != H

    def __init__(
        self,
        vocab_size: int,
        embedding_size: int = 128,
        hidden_size: int = 128,
        num_layers: int = 2,
        num_heads: int = 2,
        intermediate_size: int = 512,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
        activation: str = "gelu",
        initializer_range: float = 0.02,
    ):
        if int(embedding_size) <= 0:
            raise ConfigError(f"model.backbone.embedding_size={embedding_size} must be a positive integer")
        self.embedding_size = int(embedding_size)  # read by build_embeddings during super().__init__
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
            pre_layer_norm=False,
            layer_norm_eps=layer_norm_eps,
            activation=activation,
            initializer_range=initializer_range,
        )

    def build_embeddings(self) -> nn.Module:
        return FactorisedEmbeddings(
            self.vocab_size,
            self.embedding_size,
            self.hidden_size,
            self.max_position_embeddings,
            self.type_vocab_size,
            self.dropout,
            self.layer_norm_eps,
            projection=self.always_project or self.embedding_size != self.hidden_size,
        )

    def to_hf(self):
        return None


class AlbertEncoder(FactorisedEmbeddingEncoder):
    declaration = AlbertEncoderParams

    def __init__(
        self,
        vocab_size: int,
        embedding_size: int = 128,
        hidden_size: int = 128,
        num_layers: int = 2,
        num_heads: int = 2,
        intermediate_size: int = 512,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        layer_norm_eps: float = 1e-12,
        activation: str = "gelu",
        initializer_range: float = 0.02,
        sharing: str = "all",
    ):
        if sharing not in SHARING_MODES:
            raise ConfigError(f"model.backbone.sharing={sharing!r} is not one of {', '.join(SHARING_MODES)}")
        self.sharing = sharing  # read by build_layers during super().__init__
        super().__init__(
            vocab_size,
            embedding_size,
            hidden_size,
            num_layers,
            num_heads,
            intermediate_size,
            max_position_embeddings,
            type_vocab_size,
            dropout,
            attention_dropout,
            layer_norm_eps,
            activation,
            initializer_range,
        )

    def build_layers(self) -> list[nn.Module]:
        if self.sharing == "all":
            return [self.build_layer()] * self.num_layers
        layers = [self.build_layer() for _ in range(self.num_layers)]
        for layer in layers[1:]:
            if self.sharing == "attention":
                layer.attention = layers[0].attention
            elif self.sharing == "ffn":
                layer.feed_forward = layers[0].feed_forward
        return layers

    # -- Hugging Face conversion (sharing=all only: AlbertModel with one layer group) -------------
    def to_hf(self):
        if self.sharing != "all" or self.activation not in ("gelu", "gelu_new", "relu"):
            return None
        from transformers import AlbertConfig, AlbertModel

        config = AlbertConfig(
            **bert_config_fields(self), embedding_size=self.embedding_size, num_hidden_groups=1, inner_group_num=1
        )
        model = AlbertModel(config, add_pooling_layer=False)
        model.load_state_dict(albert_state_dict_to_hf(self.state_dict()), strict=True)
        return model.eval()

    @classmethod
    def from_hf(cls, model) -> AlbertEncoder:
        """Build from a Hugging Face `AlbertModel` with one layer group of one layer (a pooler is ignored)."""
        c = model.config
        if c.num_hidden_groups != 1 or c.inner_group_num != 1:
            raise BackboneError(
                f"AlbertModel with num_hidden_groups={c.num_hidden_groups}, inner_group_num="
                f"{c.inner_group_num} has no AlbertEncoder counterpart (needs 1 and 1)"
            )
        encoder = cls(**bert_arguments_from_hf(c), embedding_size=c.embedding_size, sharing="all")
        encoder.load_state_dict(albert_state_dict_from_hf(model.state_dict(), c.num_hidden_layers), strict=True)
        return encoder


_ALBERT_EMBEDDINGS = {
    "embeddings.word_embeddings": "embeddings.word_embeddings",
    "embeddings.position_embeddings": "embeddings.position_embeddings",
    "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings.layer_norm": "embeddings.LayerNorm",
    "embeddings.projection": "encoder.embedding_hidden_mapping_in",
}
_ALBERT_LAYER = {
    "attention.query": "attention.query",
    "attention.key": "attention.key",
    "attention.value": "attention.value",
    "attention.output": "attention.dense",
    "attention_norm": "attention.LayerNorm",
    "feed_forward.dense_in": "ffn",
    "feed_forward.dense_out": "ffn_output",
    "feed_forward_norm": "full_layer_layer_norm",
}
_HF_SHARED_LAYER = "encoder.albert_layer_groups.0.albert_layers.0"


def _albert_key_map(num_layers: int) -> dict[str, str]:
    """ours -> AlbertModel module names. Every `stack.layers.i` is the same shared module."""
    mapping = dict(_ALBERT_EMBEDDINGS)
    for i in range(num_layers):
        for ours, theirs in _ALBERT_LAYER.items():
            mapping[f"stack.layers.{i}.{ours}"] = f"{_HF_SHARED_LAYER}.{theirs}"
    return mapping


def albert_state_dict_to_hf(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    num_layers = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("stack.layers."))
    return rename_state_keys(state, _albert_key_map(num_layers))


def albert_state_dict_from_hf(state: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    inverse = {}
    for ours, theirs in _albert_key_map(num_layers).items():
        inverse.setdefault(theirs, []).append(ours)
    out = {}
    for key, value in state.items():
        module, _, param = key.rpartition(".")
        for ours in inverse.get(module, []):  # the shared HF layer fills every one of our L slots
            out[f"{ours}.{param}"] = value
    return out

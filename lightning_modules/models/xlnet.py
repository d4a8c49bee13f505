"""XLNet-style permutation language model backbone (Yang et al. 2019), `family: permutation`.

Permutation LM predicts tokens in a sampled factorisation order z: the token at z_t from the
tokens at z_<t. Two streams share every parameter of the encoder:

    content stream h   standard self-attention; position i attends to every j with
                       rank(j) <= rank(i) (earlier in the order, and itself)
    query stream g     knows WHERE it predicts but not WHAT: g_i^0 = w + position(i) (+ segment),
                       w a learned vector; layer m attends with queries from g_i^{m-1} to keys and
                       values from the content stream h^{m-1} at rank(j) < rank(i) (strictly
                       earlier: never its own token), then the same feed-forward

Partial prediction: only the last ceil(T/K) tokens of the order are targets (`predict_fraction`
= 1/K); `permutation_masks` samples the order and builds both masks and the target mask.

Simplifications, stated: positions are learned absolute embeddings (XLNet uses Transformer-XL's
relative positional encodings and segment recurrence, which this backbone does not have), and
non-target tokens follow the sampled order too (XLNet's code lets them see each other
bidirectionally). There is therefore no Hugging Face XLNetModel parity.

Objectives: `backbone(ids, attention_mask, content_mask=m.content_mask, query_mask=m.query_mask)`
returns `TwoStreamOutput.query_hidden_states[-1]`; predict `input_ids` at `m.target_mask` from it
with a head tied to `get_input_embeddings()`. Without the masks the backbone is a plain
bidirectional encoder (the content stream with full attention), which is what fine-tuning and
probing use; `family: permutation` tells objectives that the two-stream forward exists.
Query states at positions with nothing earlier in the order (the first of the order, padding)
are meaningless and never targets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from lightning_modules.models.base import BackboneOutput
from lightning_modules.models.transformer import PostLNLayer, TransformerEncoder
from ptmlab.errors import ConfigError


# -- the factorisation order and its masks (pure) ---------------------------------------------------

@dataclass
class PermutationMasks:
    order: torch.Tensor  # B×T long: order[b, t] = the position predicted at step t
    rank: torch.Tensor  # B×T long: rank[b, i] = the step at which position i comes (inverse of order)
    content_mask: torch.Tensor  # B×T×T bool: query i may attend to key j (rank j <= rank i)
    query_mask: torch.Tensor  # B×T×T bool: query i may attend to key j (rank j < rank i)
    target_mask: torch.Tensor  # B×T bool: positions to predict (the last part of the order)


def permutation_masks(seq_len: int, generator: torch.Generator | None, predict_fraction: float,
                      batch_size: int = 1, attention_mask: torch.Tensor | None = None,
                      device: torch.device | str | None = None) -> PermutationMasks:
    """Sample one factorisation order per row and build XLNet's masks ("True = may attend").

    Targets: the last ceil(L·predict_fraction) positions of the order, L = the row's real length
    (L = seq_len without padding), capped at L-1 so the first of the order is always context.
    With `attention_mask` (B×T, 1 = token), padding comes after every real token in the order, so
    real tokens never attend to it, and it is never a target.
    """
    if not 0.0 < float(predict_fraction) < 1.0:
        raise ConfigError(f"predict_fraction={predict_fraction} must be in (0, 1) (XLNet predicts 1/K, K = 6 or 7)")
    if attention_mask is not None:
        batch_size, seq_len = attention_mask.shape
        device = attention_mask.device if device is None else device
    gen_device = generator.device if generator is not None else torch.device("cpu")
    keys = torch.rand(batch_size, seq_len, generator=generator, device=gen_device).to(device)  # B×T in [0, 1)
    if attention_mask is not None:
        real = attention_mask.bool().to(keys.device)
        keys = torch.where(real, keys, keys + 2.0)  # padding sorts after all real tokens
        lengths = real.sum(dim=1)
    else:
        real = torch.ones(batch_size, seq_len, dtype=torch.bool, device=keys.device)
        lengths = torch.full((batch_size,), seq_len, device=keys.device)
    order = keys.argsort(dim=1)  # B×T
    rank = order.argsort(dim=1)  # B×T, the inverse permutation
    content_mask = rank[:, None, :] <= rank[:, :, None]  # B×1×T vs B×T×1 -> B×T×T (query i, key j)
    query_mask = rank[:, None, :] < rank[:, :, None]
    # ceil with a tolerance: 12·(1/6) must give 2, not 3 from a rounding error.
    wanted = torch.ceil(lengths.double() * float(predict_fraction) - 1e-9).long()
    num_targets = torch.minimum(wanted, (lengths - 1).clamp(min=0))
    target_mask = (rank >= (lengths - num_targets)[:, None]) & real
    return PermutationMasks(order=order, rank=rank, content_mask=content_mask, query_mask=query_mask,
                            target_mask=target_mask)


# -- the backbone ------------------------------------------------------------------------------------

@dataclass
class TwoStreamOutput(BackboneOutput):
    query_hidden_states: tuple[torch.Tensor, ...] | None = None  # L+1 × (B, T, H), g^0 first


class TwoStreamLayer(PostLNLayer):
    """A post-LN block that can also run the query stream with the same parameters."""

    def query_stream(self, g: torch.Tensor, h: torch.Tensor, attention_bias: torch.Tensor | None) -> torch.Tensor:
        attended, _ = self.attention(g, attention_bias, False, False, key_value_states=h)  # Q from g, K/V from h
        g = self.attention_norm(g + attended)
        return self.feed_forward_norm(g + self.feed_forward(g))


class XLNetEncoder(TransformerEncoder):
    family = "permutation"
    is_causal = False

    def __init__(self, vocab_size: int, hidden_size: int = 128, num_layers: int = 2, num_heads: int = 2,
                 intermediate_size: int = 512, max_position_embeddings: int = 512, type_vocab_size: int = 2,
                 dropout: float = 0.1, attention_dropout: float = 0.1, layer_norm_eps: float = 1e-12,
                 activation: str = "gelu", initializer_range: float = 0.02):
        super().__init__(vocab_size, hidden_size, num_layers, num_heads, intermediate_size,
                         max_position_embeddings, type_vocab_size, dropout, attention_dropout,
                         pre_layer_norm=False, layer_norm_eps=layer_norm_eps, activation=activation,
                         initializer_range=initializer_range)
        self.mask_embedding = nn.Parameter(torch.empty(self.hidden_size).normal_(0.0, self.initializer_range))  # w

    @property
    def layer_class(self) -> type[PostLNLayer]:
        return TwoStreamLayer

    def query_embeddings(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                         position_ids: torch.Tensor | None) -> torch.Tensor:
        """g^0 = w + position (+ segment): where to predict, nothing about what is there."""
        emb = self.embeddings
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)  # 1×T
        g = self.mask_embedding + emb.position_embeddings(position_ids)  # H + 1×T×H -> 1×T×H
        if emb.token_type_embeddings is not None:
            types = token_type_ids if token_type_ids is not None else torch.zeros_like(input_ids)
            g = g + emb.token_type_embeddings(types)
        g = g.expand(input_ids.shape[0], -1, -1)  # -> B×T×H
        if emb.layer_norm is not None:
            g = emb.layer_norm(g)
        return emb.dropout(g)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, output_attentions: bool = False,
                content_mask: torch.Tensor | None = None, query_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None,
                self_attention_mask: torch.Tensor | None = None) -> TwoStreamOutput:
        if query_mask is None:  # one stream: a bidirectional encoder (or content-masked, if given)
            extra = content_mask if content_mask is not None else self_attention_mask
            out = super().forward(input_ids, attention_mask, token_type_ids, output_attentions, extra, position_ids)
            return TwoStreamOutput(hidden_states=out.hidden_states, attentions=out.attentions)
        if content_mask is None:
            raise ValueError("XLNetEncoder: query_mask needs its content_mask (see permutation_masks)")
        seq_len = input_ids.shape[1]
        h = self.embeddings(input_ids, token_type_ids=token_type_ids, position_ids=position_ids)
        g = self.query_embeddings(input_ids, token_type_ids, position_ids)
        content_bias = self.attention_bias(attention_mask, content_mask, seq_len, h.dtype)
        query_bias = self.attention_bias(attention_mask, query_mask, seq_len, h.dtype)
        hidden_states, query_states = [h], [g]
        attentions = [] if output_attentions else None
        for layer in self.stack.layers:
            g = layer.query_stream(g, h, query_bias)  # reads h^{m-1}, so before h is updated
            h, probs = layer(h, content_bias, False, output_attentions)
            hidden_states.append(h)
            query_states.append(g)
            if attentions is not None:
                attentions.append(probs)
        return TwoStreamOutput(hidden_states=tuple(hidden_states),
                               attentions=tuple(attentions) if attentions is not None else None,
                               query_hidden_states=tuple(query_states))

    def to_hf(self):
        return None  # relative positions and recurrence differ from XLNetModel: no counterpart


def num_targets(seq_len: int, predict_fraction: float) -> int:
    """ceil(T·predict_fraction), capped at T-1: how many tokens one unpadded row predicts."""
    return min(math.ceil(seq_len * predict_fraction - 1e-9), seq_len - 1)

"""XLNet permutation language model backbone (Yang et al. 2019), `family: permutation`.

Permutation LM predicts tokens in a sampled factorisation order z: the token at z_t from the
tokens at z_<t. Two streams share every parameter of the encoder:

    content stream h   h^0 = the token embedding; position i attends to every j with
                       rank(j) <= rank(i) (earlier in the order, and itself)
    query stream g     knows WHERE it predicts but not WHAT: g^0 = w, one learned vector for
                       every position; layer m attends with queries from g_i^{m-1} to keys and
                       values from the content stream h^{m-1} at rank(j) < rank(i) (strictly
                       earlier: never its own token), then the same feed-forward

Positions enter only through Transformer-XL's relative attention (Dai et al. 2019), as in
XLNet: score(i, j) = (q_i + u)·k_j + (q_i + v)·W_r·R(i - j) + (q_i + s)·e_[seg_i != seg_j], with R
the sinusoidal encoding of the distance i - j, u, v, s learned per-head biases and e a learned
"same / different segment" embedding. So the query stream's g^0 carries no position: it gets
its position from R, like every query.

Partial prediction: only the last ceil(T/K) tokens of the order are targets (`predict_fraction`
= 1/K); `permutation_masks` samples the order and builds both masks and the target mask.

Same weights, same outputs as Hugging Face `XLNetModel` (attn_type "bi", no memory, no
bi_data, no clamp_len), with dropout in the same places; `to_hf()` and `from_hf()` convert, and
tests/lightning_modules/test_xlnet.py checks both streams layer by layer, both ways. XLNetModel
also drops out its last_hidden_state once more (not its hidden_states); hidden_states[-1] here is
the last layer's output without that extra dropout.
Left out: segment-level recurrence (memory of the previous segment).
Non-target tokens follow the sampled order too (XLNet's data pipeline lets them see each other
bidirectionally).

Objectives: `backbone(ids, attention_mask, content_mask=m.content_mask, query_mask=m.query_mask)`
returns `TwoStreamOutput.query_hidden_states[-1]`; predict `input_ids` at `m.target_mask` from it
with a head tied to `get_input_embeddings()`. Without the masks the backbone is a plain
bidirectional encoder (the content stream with full attention), which is what fine-tuning and
probing use. Query states at positions with nothing earlier in the order (the first of the
order, padding) attend uniformly to nothing useful and are never targets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.models.base import Backbone, BackboneOutput
from lightning_modules.models.transformer import FeedForward, init_weights
from ptmlab.contracts import BackboneError, ConfigError
from ptmlab.methods.models import XLNetEncoderParams

# A masked score: finite, as in XLNet, so a row with nothing to attend to softmaxes to uniform
# instead of NaN (the first position of the order in the query stream).
MASKED_SCORE = -1e30


# -- the factorisation order and its masks (pure) ---------------------------------------------------


@dataclass
class PermutationMasks:
    order: torch.Tensor  # B×T long: order[b, t] = the position predicted at step t
    rank: torch.Tensor  # B×T long: rank[b, i] = the step at which position i comes (inverse of order)
    content_mask: torch.Tensor  # B×T×T bool: query i may attend to key j (rank j <= rank i)
    query_mask: torch.Tensor  # B×T×T bool: query i may attend to key j (rank j < rank i)
    target_mask: torch.Tensor  # B×T bool: positions to predict (the last part of the order)


def permutation_masks(
    seq_len: int,
    generator: torch.Generator | None,
    predict_fraction: float,
    batch_size: int = 1,
    attention_mask: torch.Tensor | None = None,
    device: torch.device | str | None = None,
) -> PermutationMasks:
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
    return PermutationMasks(
        order=order, rank=rank, content_mask=content_mask, query_mask=query_mask, target_mask=target_mask
    )


# -- the backbone ------------------------------------------------------------------------------------


@dataclass
class TwoStreamOutput(BackboneOutput):
    query_hidden_states: tuple[torch.Tensor, ...] | None = None  # L+1 × (B, T, H), g^0 first


def relative_position_encoding(seq_len: int, hidden_size: int, device=None) -> torch.Tensor:
    """Sinusoidal encodings of the distances T, T-1, ..., 1-T (2T rows, H columns, the sines then
    the cosines), Transformer-XL's R for bidirectional attention without memory."""
    distances = torch.arange(seq_len, -seq_len, -1, device=device, dtype=torch.float32)  # 2T
    inv_freq = 1.0 / torch.pow(
        10000.0, torch.arange(0, hidden_size, 2, device=device, dtype=torch.float32) / hidden_size
    )
    angles = distances[:, None] * inv_freq[None, :]  # 2T×1 · 1×H/2 -> 2T×H/2
    return torch.cat([angles.sin(), angles.cos()], dim=-1)  # 2T×H


def relative_index(seq_len: int, device=None) -> torch.Tensor:
    """T×T: column of the distance i - j in `relative_position_encoding`'s rows (row p holds
    distance T - p, so p = T - i + j)."""
    positions = torch.arange(seq_len, device=device)
    return seq_len - positions[:, None] + positions[None, :]


class RelativeAttention(nn.Module):
    """Multi-head attention with XLNet's content, position and segment terms. Returns the output
    projection (dropout applied); the residual and LayerNorm belong to the layer, so adapters can
    wrap `output` as in every other ptmlab layer."""

    def __init__(self, hidden_size: int, num_heads: int, attention_dropout: float, dropout: float):
        super().__init__()
        if hidden_size % num_heads:
            raise ConfigError(f"hidden_size={hidden_size} is not divisible by num_heads={num_heads}")
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        # XLNet's projections have no biases; the learned biases below play that role per term.
        self.query = nn.Linear(hidden_size, hidden_size, bias=False)
        self.key = nn.Linear(hidden_size, hidden_size, bias=False)
        self.value = nn.Linear(hidden_size, hidden_size, bias=False)
        self.position = nn.Linear(hidden_size, hidden_size, bias=False)  # W_r, applied to R
        self.output = nn.Linear(hidden_size, hidden_size, bias=False)
        self.content_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))  # u (r_w_bias)
        self.position_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))  # v (r_r_bias)
        self.segment_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))  # s (r_s_bias)
        self.segment_embedding = nn.Parameter(torch.zeros(2, num_heads, self.head_dim))  # same / different
        self.attention_dropout = nn.Dropout(attention_dropout)
        self.output_dropout = nn.Dropout(dropout)

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (self.num_heads, self.head_dim)).transpose(-3, -2)  # ...×T×H -> ...×n×T×d

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        positions: torch.Tensor,
        segment_differs: torch.Tensor | None,
        allowed: torch.Tensor | None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """queries: B×T×H (either stream); keys, values: B×n×T×d from the content stream;
        positions: [B×]n×2T×d (W_r·R); segment_differs: B×T×T bool; allowed: B×T×T bool or None."""
        q = self.heads(self.query(queries))  # B×n×T×d
        seq_len = q.shape[-2]
        content = torch.matmul(q + self.content_bias[:, None], keys.transpose(-1, -2))  # B×n×T×T
        by_distance = torch.matmul(q + self.position_bias[:, None], positions.transpose(-1, -2))  # B×n×T×2T
        index = relative_index(seq_len, q.device).expand(*by_distance.shape[:-1], seq_len)  # B×n×T×T
        scores = content + by_distance.gather(-1, index)  # entry (i, j): the term of distance i - j
        if segment_differs is not None:
            segment = torch.einsum("bnid,snd->bnis", q + self.segment_bias[:, None], self.segment_embedding)  # B×n×T×2
            scores = scores + torch.where(segment_differs[:, None], segment[..., 1:], segment[..., :1])
        scores = scores.float() * self.head_dim**-0.5
        if allowed is not None:
            scores = scores.masked_fill(~allowed[:, None], MASKED_SCORE)
        probs = F.softmax(scores, dim=-1).to(q.dtype)
        context = torch.matmul(self.attention_dropout(probs), values)  # B×n×T×d
        context = context.transpose(-3, -2).flatten(-2)  # -> B×T×H
        return self.output_dropout(self.output(context)), (probs if need_weights else None)


class XLNetFeedForward(FeedForward):
    """FeedForward with XLNet's dropout placement: after the activation as well as after the
    output (BERT's drops out after the output only), so training matches XLNetFeedForward too."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.dense_out(self.dropout(self.activation(self.dense_in(x)))))


class TwoStreamLayer(nn.Module):
    """XLNet's block, post-LN: x = LN(x + RelAttn(x)); x = LN(x + FFN(x)), run for the content
    stream and, with the same weights and the content stream's keys and values, the query stream."""

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        intermediate_size: int,
        dropout: float,
        attention_dropout: float,
        layer_norm_eps: float,
        activation: str,
    ):
        super().__init__()
        self.attention = RelativeAttention(hidden_size, num_heads, attention_dropout, dropout)
        self.attention_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.feed_forward = XLNetFeedForward(hidden_size, intermediate_size, activation, dropout)
        self.feed_forward_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)

    def block(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + attended)
        return self.feed_forward_norm(x + self.feed_forward(x))

    def forward(
        self,
        h: torch.Tensor,
        g: torch.Tensor | None,
        relative: torch.Tensor,
        segment_differs: torch.Tensor | None,
        content_allowed: torch.Tensor | None,
        query_allowed: torch.Tensor | None,
        need_weights: bool = False,
    ):
        attention = self.attention
        keys, values = attention.heads(attention.key(h)), attention.heads(attention.value(h))  # B×n×T×d
        positions = attention.heads(attention.position(relative))  # [B×]2T×H -> [B×]n×2T×d
        attended, probs = attention(h, keys, values, positions, segment_differs, content_allowed, need_weights)
        if g is not None:  # reads h^{m-1}: both streams use the keys and values computed above
            g_attended, _ = attention(g, keys, values, positions, segment_differs, query_allowed)
            g = self.block(g, g_attended)
        return self.block(h, attended), g, probs


class XLNetEmbeddings(nn.Module):
    """The token embedding (content stream) and w, the query stream's start (no position: XLNet
    has no absolute positions)."""

    def __init__(self, vocab_size: int, hidden_size: int, dropout: float):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size)
        self.mask_embedding = nn.Parameter(torch.zeros(hidden_size))  # w
        self.dropout = nn.Dropout(dropout)


class XLNetEncoder(Backbone):
    declaration = XLNetEncoderParams

    family = "permutation"
    is_causal = False

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int = 128,
        num_layers: int = 2,
        num_heads: int = 2,
        intermediate_size: int = 512,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
        activation: str = "gelu",
        initializer_range: float = 0.02,
    ):
        super().__init__()
        if hidden_size % 2:
            raise ConfigError(f"hidden_size={hidden_size} must be even (sine and cosine halves of R)")
        self.vocab_size, self.hidden_size, self.num_layers = vocab_size, hidden_size, num_layers
        self.num_heads, self.intermediate_size = num_heads, intermediate_size
        self.dropout_rate, self.layer_norm_eps, self.activation = dropout, layer_norm_eps, activation
        self.initializer_range = initializer_range
        self.embeddings = XLNetEmbeddings(vocab_size, hidden_size, dropout)
        self.layers = nn.ModuleList(
            TwoStreamLayer(
                hidden_size, num_heads, intermediate_size, dropout, attention_dropout, layer_norm_eps, activation
            )
            for _ in range(num_layers)
        )
        self.dropout = nn.Dropout(dropout)
        self.apply(lambda module: init_weights(module, initializer_range))
        for name, param in self.named_parameters():  # as XLNet: the biases u, v, s, e and w too
            if name.endswith(("_bias", "segment_embedding", "mask_embedding")):
                nn.init.normal_(param, 0.0, initializer_range)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def layer_modules(self) -> list[nn.Module]:
        return list(self.layers)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        content_mask: torch.Tensor | None = None,
        query_mask: torch.Tensor | None = None,
    ) -> TwoStreamOutput:
        """Masks are B×T×T bool, True = may attend (see `permutation_masks`). Without `query_mask`
        only the content stream runs."""
        if query_mask is not None and content_mask is None:
            raise ValueError("XLNetEncoder: query_mask needs its content_mask (see permutation_masks)")
        batch_size, seq_len = input_ids.shape
        emb = self.embeddings
        h = emb.dropout(emb.word_embeddings(input_ids))  # B×T×H
        g = None
        if query_mask is not None:
            g = emb.dropout(emb.mask_embedding.expand(batch_size, seq_len, -1))  # B×T×H
        key_real = attention_mask.bool()[:, None, :] if attention_mask is not None else None  # B×1×T
        content_allowed = content_mask
        if key_real is not None:
            content_allowed = key_real if content_allowed is None else content_allowed & key_real
        if content_allowed is not None:
            # Every position may attend to itself, padding included (a padded row stays finite).
            content_allowed = content_allowed | torch.eye(seq_len, dtype=torch.bool, device=input_ids.device)
            content_allowed = content_allowed.expand(batch_size, seq_len, seq_len)
        query_allowed = None
        if query_mask is not None:
            query_allowed = query_mask if key_real is None else query_mask & key_real
        segment_differs = None
        if token_type_ids is not None:
            segment_differs = token_type_ids[:, :, None] != token_type_ids[:, None, :]  # B×T×T
        relative = relative_position_encoding(seq_len, self.hidden_size, input_ids.device).to(h.dtype)  # 2T×H
        if self.training and self.dropout.p > 0:
            # XLNet drops R out per sequence: one 2T×H copy per row, W_r·R then per row too.
            relative = relative.expand(batch_size, -1, -1)  # 2T×H -> B×2T×H
        relative = self.dropout(relative)
        hidden_states, query_states = [h], ([g] if g is not None else None)
        attentions = [] if output_attentions else None
        for layer in self.layers:
            h, g, probs = layer(h, g, relative, segment_differs, content_allowed, query_allowed, output_attentions)
            hidden_states.append(h)
            if query_states is not None:
                query_states.append(g)
            if attentions is not None:
                attentions.append(probs)
        return TwoStreamOutput(
            hidden_states=tuple(hidden_states),
            attentions=tuple(attentions) if attentions is not None else None,
            query_hidden_states=tuple(query_states) if query_states is not None else None,
        )

    # -- Hugging Face -------------------------------------------------------------------------------
    def hf_config(self):
        from transformers import XLNetConfig

        return XLNetConfig(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            n_layer=self.num_layers,
            n_head=self.num_heads,
            d_inner=self.intermediate_size,
            ff_activation=self.activation,
            layer_norm_eps=self.layer_norm_eps,
            dropout=self.dropout_rate,
            attn_type="bi",
            bi_data=False,
            clamp_len=-1,
            mem_len=None,
            initializer_range=self.initializer_range,
        )

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """Our weights under XLNetModel's names and shapes (`xlnet_state_dict_to_hf`)."""
        return xlnet_state_dict_to_hf(self.state_dict(), self.num_heads, self.num_layers)

    def to_hf(self):
        """A `transformers.XLNetModel` with these weights (the export stage saves it)."""
        from transformers import XLNetModel

        model = XLNetModel(self.hf_config())
        model.load_state_dict(self.hf_state_dict(), strict=True)
        return model.eval()

    @classmethod
    def from_hf(cls, model) -> XLNetEncoder:
        """Build from a Hugging Face `XLNetModel` (or a model around one, e.g. XLNetLMHeadModel:
        its body is taken, its head ignored). Only what this encoder computes converts: attn_type
        "bi", no bi_data, no clamp_len; memory settings (mem_len, reuse_len) do not matter without
        recurrence."""
        body = getattr(model, "base_model", model)
        c = body.config
        unsupported = {"attn_type": (c.attn_type, "bi"), "bi_data": (c.bi_data, False)}
        for key, (value, wanted) in unsupported.items():
            if value != wanted:
                raise BackboneError(
                    f"XLNetModel with {key}={value!r} has no XLNetEncoder counterpart (needs {wanted!r})"
                )
        if c.clamp_len is not None and c.clamp_len > 0:
            raise BackboneError(
                f"XLNetModel with clamp_len={c.clamp_len} has no XLNetEncoder counterpart "
                f"(distances are never clamped; needs clamp_len=-1)"
            )
        # XLNet has one dropout rate, for the attention probabilities too.
        encoder = cls(
            vocab_size=c.vocab_size,
            hidden_size=c.d_model,
            num_layers=c.n_layer,
            num_heads=c.n_head,
            intermediate_size=c.d_inner,
            dropout=c.dropout,
            attention_dropout=c.dropout,
            layer_norm_eps=c.layer_norm_eps,
            activation=c.ff_activation,
            initializer_range=c.initializer_range,
        )
        encoder.load_state_dict(xlnet_state_dict_from_hf(body.state_dict(), c.n_layer), strict=True)
        return encoder


# -- Hugging Face names ------------------------------------------------------------------------------
# XLNetModel keeps its attention projections as H×n×d tensors used by einsum ("ibh,hnd->ibnd" for
# q/k/v/r, "ibnd,hnd->ibh" for o): q/k/v/r are our Linear weights transposed, o is ours as is.
_PROJECTIONS = {
    "attention.query.weight": "rel_attn.q",
    "attention.key.weight": "rel_attn.k",
    "attention.value.weight": "rel_attn.v",
    "attention.position.weight": "rel_attn.r",
}
_LAYER_AS_IS = {
    "attention.content_bias": "rel_attn.r_w_bias",
    "attention.position_bias": "rel_attn.r_r_bias",
    "attention.segment_bias": "rel_attn.r_s_bias",
    "attention.segment_embedding": "rel_attn.seg_embed",
    "attention_norm.weight": "rel_attn.layer_norm.weight",
    "attention_norm.bias": "rel_attn.layer_norm.bias",
    "feed_forward.dense_in.weight": "ff.layer_1.weight",
    "feed_forward.dense_in.bias": "ff.layer_1.bias",
    "feed_forward.dense_out.weight": "ff.layer_2.weight",
    "feed_forward.dense_out.bias": "ff.layer_2.bias",
    "feed_forward_norm.weight": "ff.layer_norm.weight",
    "feed_forward_norm.bias": "ff.layer_norm.bias",
}


def xlnet_state_dict_to_hf(state: dict[str, torch.Tensor], num_heads: int, num_layers: int) -> dict[str, torch.Tensor]:
    """An XLNetEncoder state dict under XLNetModel's names and shapes."""
    word = state["embeddings.word_embeddings.weight"]
    hidden = word.shape[1]
    out = {
        "word_embedding.weight": word,
        "mask_emb": state["embeddings.mask_embedding"].view(1, 1, hidden),
    }  # H -> 1×1×H
    for i in range(num_layers):
        ours, theirs = f"layers.{i}.", f"layer.{i}."
        for name, hf_name in _PROJECTIONS.items():
            out[theirs + hf_name] = state[ours + name].t().reshape(hidden, num_heads, -1)  # (n·d)×H -> H×n×d
        output = state[ours + "attention.output.weight"]
        out[theirs + "rel_attn.o"] = output.reshape(hidden, num_heads, -1)  # H×(n·d) -> H×n×d
        for name, hf_name in _LAYER_AS_IS.items():
            out[theirs + hf_name] = state[ours + name]
    return {k: v.detach().clone() for k, v in out.items()}


def xlnet_state_dict_from_hf(state: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    """The inverse of `xlnet_state_dict_to_hf`: an XLNetModel state dict under our names."""
    word = state["word_embedding.weight"]
    hidden = word.shape[1]
    out = {
        "embeddings.word_embeddings.weight": word,
        "embeddings.mask_embedding": state["mask_emb"].reshape(hidden),
    }  # 1×1×H -> H
    for i in range(num_layers):
        ours, theirs = f"layers.{i}.", f"layer.{i}."
        for name, hf_name in _PROJECTIONS.items():
            out[ours + name] = state[theirs + hf_name].reshape(hidden, -1).t()  # H×n×d -> (n·d)×H
        out[ours + "attention.output.weight"] = state[theirs + "rel_attn.o"].reshape(hidden, -1)  # H×n×d -> H×(n·d)
        for name, hf_name in _LAYER_AS_IS.items():
            out[ours + name] = state[theirs + hf_name]
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def num_targets(seq_len: int, predict_fraction: float) -> int:
    """ceil(T·predict_fraction), capped at T-1: how many tokens one unpadded row predicts."""
    return min(math.ceil(seq_len * predict_fraction - 1e-9), seq_len - 1)

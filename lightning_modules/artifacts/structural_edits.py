"""Structural edits of a task model that compression methods make and loading re-applies.

A compressed task model is saved with its architecture *as built* (the model config or the
Hugging Face config.json) plus a list of structural edits, `manifest["compression"]`
(artifacts/saved_task_model.py): loading builds the architecture, applies the edits in order so every
tensor has the shape it was saved with, then reads the weights. Each edit is a small JSON dict:

    {"op": "prune_heads", "heads_per_layer": [12, 8, ...]}   attention heads kept per layer
    {"op": "low_rank", "ranks": {"backbone.model.encoder.layer.0.attention.self.query": 96, ...}}
    {"op": "cast", "dtype": "bfloat16"}
    {"op": "quantize", "backend": "torch.ao", "embeddings": true, ...}  (artifacts/quantization.py)

Layer counts need no edit: a dropped-layer model or a shallower student is saved with its own
config (num_hidden_layers / num_layers).

Attention heads are sliced out of the query/key/value projections (output rows) and the output
projection (input columns), so the matrices really shrink (transformers 5 dropped `prune_heads`).
Two families are known: Hugging Face BERT-family layers (`layer.attention.self.{query,key,value}`,
`layer.attention.output.dense`) and ptmlab's own Transformer (`layer.attention.{query,key,value,
output}`, lightning_modules/models/transformer.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ptmlab.contracts import ConfigError


# -- attention heads ------------------------------------------------------------------------------
@dataclass
class AttentionHeads:
    """The four projections of one layer's self-attention and the module that counts its heads."""

    owner: nn.Module  # holds the head count (HF: num_attention_heads, ptmlab: num_heads)
    query: nn.Linear
    key: nn.Linear
    value: nn.Linear
    output: nn.Linear  # its input columns are the heads' concatenated outputs
    head_dim: int

    @property
    def num_heads(self) -> int:
        return int(getattr(self.owner, "num_attention_heads", getattr(self.owner, "num_heads", 0)))

    def set_num_heads(self, n: int) -> None:
        if hasattr(self.owner, "num_attention_heads"):  # Hugging Face BertSelfAttention
            self.owner.num_attention_heads = n
            self.owner.all_head_size = n * self.head_dim
        else:  # ptmlab MultiHeadAttention
            self.owner.num_heads = n

    def keep(self, heads: list[int]) -> None:
        """Keep only `heads` (indices into the current heads), slicing every projection."""
        from transformers.pytorch_utils import prune_linear_layer

        d = self.head_dim
        index = torch.cat([torch.arange(h * d, (h + 1) * d) for h in sorted(heads)]).long()
        parent = {id(m): (p, name) for p in self._parents() for name, m in p.named_children()}
        for lin, dim in ((self.query, 0), (self.key, 0), (self.value, 0), (self.output, 1)):
            new = prune_linear_layer(lin, index.to(lin.weight.device), dim=dim)
            p, name = parent[id(lin)]
            setattr(p, name, new)
        self._refresh()
        self.set_num_heads(len(heads))

    # the projections live on the owner (HF: query/key/value; ptmlab: all four) and, for HF, on
    # the layer's attention.output module
    def _parents(self) -> list[nn.Module]:
        return [m for m in (self.owner, getattr(self, "output_parent", None)) if m is not None]

    def _refresh(self) -> None:
        self.query, self.key, self.value = self.owner.query, self.owner.key, self.owner.value
        out_parent = getattr(self, "output_parent", None)
        self.output = out_parent.dense if out_parent is not None else self.owner.output


def attention_heads(backbone: nn.Module) -> list[AttentionHeads]:
    """One AttentionHeads per layer of a backbone (ConfigError for an architecture without the
    known projections, or with layers shared across depth)."""
    layers = list(backbone.layer_modules())
    if len({id(layer) for layer in layers}) != len(layers):
        raise ConfigError(
            "compression: this backbone shares its layers across depth (ALBERT-style); "
            "pruning heads of a shared layer would prune every layer alike"
        )
    out = []
    for i, layer in enumerate(layers):
        att = getattr(layer, "attention", None)
        hf_self = getattr(att, "self", None)
        if hf_self is not None and hasattr(hf_self, "query"):
            heads = AttentionHeads(
                hf_self, hf_self.query, hf_self.key, hf_self.value, att.output.dense, int(hf_self.attention_head_size)
            )
            heads.output_parent = att.output
        elif att is not None and all(hasattr(att, k) for k in ("query", "key", "value", "output", "head_dim")):
            heads = AttentionHeads(att, att.query, att.key, att.value, att.output, int(att.head_dim))
        else:
            raise ConfigError(
                f"compression: layer {i} ({type(layer).__name__}) has no self-attention with "
                f"query/key/value/output projections this method knows"
            )
        out.append(heads)
    return out


class HeadGates:
    """A multiplicative gate per head on the attention output, before the output projection
    (Michel et al. 2019): |∂L/∂gate| is the head's importance. Removable hooks; the gates are
    leaf tensors with requires_grad."""

    def __init__(self, heads: list[AttentionHeads]):
        self.gates = [torch.ones(h.num_heads, requires_grad=True) for h in heads]
        self.handles = []
        for h, gate in zip(heads, self.gates):
            self.handles.append(h.output.register_forward_pre_hook(self._hook(gate, h.head_dim)))

    @staticmethod
    def _hook(gate: torch.Tensor, head_dim: int):
        def pre_hook(module, args):
            (x, *rest) = args
            shape = x.shape
            x = x.view(*shape[:-1], gate.numel(), head_dim) * gate.to(x.dtype).view(-1, 1)  # B×T×H -> B×T×heads×d
            return (x.reshape(shape), *rest)

        return pre_hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def prune_heads_to(backbone: nn.Module, heads_per_layer: list[int]) -> None:
    """Loading: keep the first n heads of each layer (the weights saved after pruning follow)."""
    layers = attention_heads(backbone)
    if len(layers) != len(heads_per_layer):
        raise ConfigError(
            f"compression prune_heads: heads_per_layer has {len(heads_per_layer)} entries for {len(layers)} layers"
        )
    for h, n in zip(layers, heads_per_layer):
        if int(n) < h.num_heads:
            h.keep(list(range(int(n))))


# -- low rank -------------------------------------------------------------------------------------
class LowRankLinear(nn.Module):
    """W ≈ B·A: in → rank (`first`, no bias) → out (`second`, the original bias)."""

    def __init__(self, in_features: int, out_features: int, rank: int, bias: bool = True):
        super().__init__()
        self.in_features, self.out_features, self.rank = in_features, out_features, rank
        self.first = nn.Linear(in_features, rank, bias=False)
        self.second = nn.Linear(rank, out_features, bias=bias)

    @classmethod
    def from_linear(cls, linear: nn.Linear, rank: int) -> LowRankLinear:
        """Truncated SVD of the weight: W (out×in) = U S Vᵀ ≈ (U_r S_r^½)(S_r^½ V_rᵀ)."""
        w = linear.weight.detach().float()
        u, s, vh = torch.linalg.svd(w, full_matrices=False)  # out×k, k, k×in
        root = s[:rank].sqrt()
        layer = cls(linear.in_features, linear.out_features, rank, bias=linear.bias is not None)
        with torch.no_grad():
            layer.first.weight.copy_(root[:, None] * vh[:rank])  # rank×in
            layer.second.weight.copy_(u[:, :rank] * root[None, :])  # out×rank
            if linear.bias is not None:
                layer.second.bias.copy_(linear.bias.detach())
        return layer.to(linear.weight.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x))


def replace_module(root: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, new)


def factorize(model: nn.Module, ranks: dict[str, int], *, from_weights: bool) -> None:
    """Replace each named Linear by a LowRankLinear of its rank (SVD of its weights, or empty
    shells when loading: the saved factors are read next)."""
    for name, rank in ranks.items():
        linear = model.get_submodule(name)
        if not isinstance(linear, nn.Linear):
            raise ConfigError(f"compression low_rank: {name} is a {type(linear).__name__}, not a Linear")
        new = (
            LowRankLinear.from_linear(linear, int(rank))
            if from_weights
            else LowRankLinear(linear.in_features, linear.out_features, int(rank), linear.bias is not None)
        )
        replace_module(model, name, new)


# -- layers ---------------------------------------------------------------------------------------
def keep_layers(backbone: nn.Module, keep: list[int]) -> None:
    """Keep only the layers `keep` (indices, in order) of a backbone, updating its layer count
    and its config (Hugging Face config.json / the ptmlab model node is saved from these)."""
    layers = backbone.layer_modules()
    n = len(layers)
    bad = [i for i in keep if not 0 <= i < n]
    if bad:
        raise ConfigError(f"compression: layer {bad[0]} does not exist (the source has layers 0..{n - 1})")
    set_layers(backbone, [layers[i] for i in keep])


def set_layers(backbone: nn.Module, modules: list[nn.Module], count: bool = True) -> None:
    """Put `modules` in place of the backbone's layer stack; `count` updates the layer count and
    config (False: a temporary mix while training, BERT-of-Theseus)."""
    parent, attr = _layer_container(backbone, backbone.layer_modules())
    kept = nn.ModuleList(modules)
    setattr(parent, attr, kept)
    if not count:
        return
    backbone.num_layers = len(modules)
    config = getattr(backbone, "config", None)
    if config is not None and hasattr(config, "num_hidden_layers"):
        config.num_hidden_layers = len(modules)
        for i, layer in enumerate(kept):  # Hugging Face layers carry their own index (caches)
            for m in layer.modules():
                if hasattr(m, "layer_idx"):
                    m.layer_idx = i


def droppable_stacks(backbone: nn.Module) -> list[nn.Module]:
    """The backbone's layer stacks (`layer_stacks()`: an encoder–decoder's encoder and decoder, else
    the backbone), each checked to hold its layers in one list that layers can be dropped from;
    ConfigError otherwise, before any training."""
    stacks = backbone.layer_stacks()
    for stack in stacks:
        try:
            _layer_container(stack, stack.layer_modules())
        except ConfigError:
            raise ConfigError(
                f"compression: the layers of {type(backbone).__name__} are not one list per stack "
                f"(a Hugging Face seq2seq checkpoint lists encoder and decoder blocks together, and T5 "
                f"keeps its position bias in the first block): drop or distil layers of a ptmlab "
                f"encoder-decoder (model=t5_tiny, bart_tiny ...) or give a student_model"
            ) from None
    return stacks


def with_layer_counts(model_node: dict, backbone: nn.Module) -> dict:
    """A copy of the `model` node that rebuilds `backbone` after layers were dropped: its layer
    counts (an encoder–decoder's `num_decoder_layers` too)."""
    import json

    node = json.loads(json.dumps(model_node))
    args = node.get("backbone", {})
    if "num_layers" in args:
        args["num_layers"] = int(backbone.num_layers)
    if hasattr(backbone, "num_decoder_layers"):
        args["num_decoder_layers"] = int(backbone.num_decoder_layers)
    return node


def _layer_container(backbone: nn.Module, layers: list[nn.Module]) -> tuple[nn.Module, str]:
    """The module and attribute that hold the layer stack (found by identity of its first layer)."""
    first = layers[0]
    for module in backbone.modules():
        for name, child in module.named_children():
            if isinstance(child, nn.ModuleList) and len(child) == len(layers) and len(child) and child[0] is first:
                return module, name
    raise ConfigError(f"compression: cannot find the layer list of {type(backbone).__name__}")


# -- loading --------------------------------------------------------------------------------------
def apply_structure(model: nn.Module, ops: list[dict]) -> dict | None:
    """Re-apply the saved edits before the weights are read. Returns the quantize edit, if any
    (its weights are read by artifacts/quantization.py, not by safetensors' load_model)."""
    quantize = None
    for op in ops:
        kind = op.get("op")
        if quantize is not None:
            raise ConfigError(f"compression: edit {kind} after quantize (quantization is the last edit)")
        if kind == "prune_heads":
            prune_heads_to(model.backbone, [int(n) for n in op["heads_per_layer"]])
        elif kind == "low_rank":
            factorize(model, {str(k): int(v) for k, v in op["ranks"].items()}, from_weights=False)
        elif kind == "cast":
            model.to(getattr(torch, str(op["dtype"])))
        elif kind == "quantize":
            quantize = op
        else:
            raise ConfigError(f"compression: unknown structural edit op={kind!r}")
    return quantize

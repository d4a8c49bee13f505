"""The backbone's own language-model head, for prompt-based modes (adaptation/prompt_based.py).

Two kinds, described by a small JSON-ready spec (saved in the task model's manifest):

    {"kind": "mlm", hidden_size, embedding_size, vocab_size, activation, layer_norm_eps}
        BERT's head (objectives/mlm.py MaskedLMHead): dense -> activation -> LayerNorm -> decoder
        tied to the input embeddings, plus a bias. ptmlab MLM pre-training exports it
        (export/lm_head.safetensors, artifacts/backbone_export.py); Hugging Face `*ForMaskedLM` checkpoints
        have the same shape (BERT `cls.predictions`, RoBERTa `lm_head`).
    {"kind": "causal"}
        a decoder's next-token logits: hidden @ input_embeddings^T (tied, no parameters).

`find_lm_head(resolved)` says which one a resolved backbone has, with its weights; a backbone
without one is a ConfigError naming the adaptation and the backbone source.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.objectives.mlm import MaskedLMHead
from ptmlab.contracts import ConfigError

LM_HEAD_WEIGHTS = "lm_head.safetensors"  # in an export folder, beside backbone.pt
LM_HEAD_SPEC = "lm_head.json"
# A randomly initialised backbone gets a fresh head of the kind its family is pre-trained with.
FRESH_HEAD_KIND = {"encoder": "mlm", "decoder": "causal"}


def mlm_head_spec(backbone) -> dict:
    embedding_size = int(backbone.get_input_embeddings().weight.shape[1])
    return {
        "kind": "mlm",
        "hidden_size": int(backbone.hidden_size),
        "embedding_size": embedding_size,
        "vocab_size": int(backbone.get_input_embeddings().weight.shape[0]),
        "activation": str(backbone.activation),
        "layer_norm_eps": float(backbone.layer_norm_eps),
    }


def build_lm_head(spec: dict) -> nn.Module | None:
    """A fresh head of this spec (None for the tied causal decoder, which has no parameters)."""
    if spec["kind"] == "causal":
        return None
    return MaskedLMHead(
        int(spec["hidden_size"]),
        int(spec["embedding_size"]),
        int(spec["vocab_size"]),
        activation=str(spec["activation"]),
        layer_norm_eps=float(spec["layer_norm_eps"]),
    )


class VerbalizerHead(nn.Module):
    """B×H hidden states at the slot -> B×C label logits: the LM head's logits of each label's
    words, averaged over the words (PET's multi-word verbalizer). Only the label words' rows of
    the vocabulary are computed. The decoder weight is the backbone's input embedding matrix,
    read at call time (`embeddings`, a callable, so the embedding is not registered twice)."""

    def __init__(self, lm_head: nn.Module | None, label_token_ids: list[list[int]], embeddings):
        super().__init__()
        self.lm_head = lm_head
        self.embeddings = embeddings
        self.out_features = len(label_token_ids)
        width = max(len(ids) for ids in label_token_ids)
        ids = torch.zeros(self.out_features, width, dtype=torch.long)
        weights = torch.zeros(self.out_features, width)
        for label, words in enumerate(label_token_ids):
            ids[label, : len(words)] = torch.tensor(words)
            weights[label, : len(words)] = 1.0 / len(words)
        # From the adaptation node (saved_node), not the weights file: not persistent.
        self.register_buffer("label_token_ids", ids, persistent=False)  # C×W
        self.register_buffer("word_weights", weights, persistent=False)  # C×W, 1/words or 0 (padding)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        embedding = self.embeddings().weight
        flat = self.label_token_ids.flatten()  # C×W -> CW
        if self.lm_head is None:  # causal decoder: tied next-token logits
            word_logits = F.linear(hidden, embedding[flat])  # B×H -> B×CW
        else:
            head = self.lm_head
            x = head.layer_norm(head.activation(head.dense(hidden)))  # B×H -> B×E
            word_logits = F.linear(x, embedding[flat], head.bias[flat])  # B×E -> B×CW
        word_logits = word_logits.view(-1, *self.label_token_ids.shape)  # B×CW -> B×C×W
        return (word_logits * self.word_weights.to(word_logits.dtype)).sum(-1)  # B×C×W -> B×C


# -- where a resolved backbone's head comes from -----------------------------------------------
def _refuse(mode: str, source: str, why: str) -> ConfigError:
    return ConfigError(f"adaptation={mode} needs the backbone's LM head, but backbone={source} {why}")


def _from_export(folder: Path, mode: str, source: str) -> tuple[dict, dict | None]:
    from safetensors.torch import load_file

    spec = json.loads((folder / LM_HEAD_SPEC).read_text())
    if spec.get("kind") == "causal":
        return spec, None
    weights = folder / LM_HEAD_WEIGHTS
    if not weights.is_file():
        raise _refuse(mode, source, f"lists an LM head in {folder / LM_HEAD_SPEC} without its weights ({weights.name})")
    return spec, load_file(str(weights))


# Hugging Face *ForMaskedLM heads that are dense -> act -> LayerNorm -> tied decoder + bias:
# (module path, dense, layer norm, bias, activation: None = config.hidden_act)
HF_MLM_HEADS = (
    ("cls.predictions", "transform.dense", "transform.LayerNorm", "bias", None),  # BERT, MiniLM, ELECTRA-like
    ("lm_head", "dense", "layer_norm", "bias", "gelu"),  # RoBERTa, XLM-R
)


def _from_hf(backbone, mode: str, source: str) -> tuple[dict, dict | None]:
    from transformers import AutoModelForMaskedLM

    if backbone.is_causal:
        return {"kind": "causal"}, None
    try:
        model, info = AutoModelForMaskedLM.from_pretrained(backbone.name_or_path, output_loading_info=True)
    except (OSError, ValueError) as exc:
        raise _refuse(
            mode,
            source,
            f"has no masked-LM head ({type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''})",
        ) from None
    modules = dict(model.named_modules())
    for path, dense, norm, bias, activation in HF_MLM_HEADS:
        if path not in modules:
            continue
        missing = [k for k in info.get("missing_keys", []) if k.startswith(path + ".") and "decoder" not in k]
        if missing:
            raise _refuse(mode, source, f"has no trained masked-LM head (its checkpoint lacks {missing[0]})")
        head = modules[path]
        spec = {**mlm_head_spec(backbone), "activation": activation or str(model.config.hidden_act)}
        spec["layer_norm_eps"] = float(getattr(model.config, "layer_norm_eps", 1e-12))

        def get(name: str, head: torch.nn.Module = head) -> torch.Tensor:
            return head.get_parameter(name).detach().clone()

        state = {
            "dense.weight": get(f"{dense}.weight"),
            "dense.bias": get(f"{dense}.bias"),
            "layer_norm.weight": get(f"{norm}.weight"),
            "layer_norm.bias": get(f"{norm}.bias"),
            "bias": get(bias),
        }
        return spec, state
    raise _refuse(
        mode, source, f"is a {type(model).__name__}, whose head is not one of {', '.join(p for p, *_ in HF_MLM_HEADS)}"
    )


def find_lm_head(resolved, mode: str) -> tuple[dict, dict | None]:
    """(spec, state dict of the head or None: fresh/parameterless) for a ResolvedBackbone."""
    backbone, source = resolved.backbone, resolved.source
    export_dir = getattr(resolved, "export_dir", None)
    if export_dir is not None and (Path(export_dir) / LM_HEAD_SPEC).is_file():
        spec, state = _from_export(Path(export_dir), mode, source)
    elif source == "random" or resolved.objective == "none":
        family = "decoder" if backbone.is_causal else str(backbone.family)
        if backbone.hf_native:
            family = "decoder" if backbone.is_causal else "encoder"
        kind = FRESH_HEAD_KIND.get(family)
        if kind is None:
            raise _refuse(mode, source, f"is a randomly initialised {family} backbone, which has no LM head")
        spec, state = ({"kind": "causal"} if kind == "causal" else mlm_head_spec(backbone)), None
    elif backbone.hf_native:
        spec, state = _from_hf(backbone, mode, source)
    else:
        objective = f" (pre-trained with objective={resolved.objective})" if resolved.objective != "unknown" else ""
        raise _refuse(
            mode,
            source,
            f"exports no LM head{objective}: masked-LM (objective=mlm and its variants) "
            f"and causal-LM (objective=clm) pre-training export one ({LM_HEAD_SPEC})",
        )
    if spec["kind"] == "causal":
        embedding_size = backbone.get_input_embeddings().weight.shape[1]
        if embedding_size != backbone.hidden_size:
            raise _refuse(
                mode,
                source,
                f"is a causal decoder with factorised embeddings "
                f"(E={embedding_size} ≠ H={backbone.hidden_size}), which its tied head cannot read",
            )
    return spec, state

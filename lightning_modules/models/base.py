"""What every backbone returns, and the conventions every backbone follows.

Attention-mask convention (stated once, used everywhere): `attention_mask` is a B×T tensor with
1 (or True) for real tokens and 0 (False) for padding, as in Hugging Face. Causal (left-to-right)
masking is a property of the architecture (`is_causal`), never encoded in `attention_mask`.

Hidden states: a tuple of L+1 tensors of shape B×T×H, the embedding layer's output first, then
one per layer. Attentions (when `output_attentions=True`): a tuple of L tensors B×heads×T×T.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ptmlab.contracts.families import FAMILIES


@dataclass
class BackboneOutput:
    hidden_states: tuple[torch.Tensor, ...]  # L+1 × (B, T, H), embeddings first
    attentions: tuple[torch.Tensor, ...] | None = None  # L × (B, heads, T, T)

    @property
    def last_hidden_state(self) -> torch.Tensor:
        return self.hidden_states[-1]


class Backbone(nn.Module):
    """Base class: subclasses set these attributes and implement forward(). What a backbone can do
    is read from the members declared here (a subclass overrides the defaults that do not fit it),
    never from its family's name."""

    family: str = "encoder"  # one of ptmlab.contracts.families.FAMILIES
    is_causal: bool = False
    has_attention: bool = True  # False: no L·T·H attention term in the FLOPs estimate (an LSTM)
    hf_native: bool = False  # its weights are a Hugging Face model's: exported in that format alone
    hidden_size: int
    num_layers: int
    vocab_size: int
    # What a head built on the backbone's states uses (BERT's MLM head transform).
    activation: str = "gelu"
    layer_norm_eps: float = 1e-12

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.family not in FAMILIES:
            raise TypeError(f"{cls.__name__}.family={cls.family!r} is not one of {', '.join(FAMILIES)}")

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> BackboneOutput:  # pragma: no cover - abstract
        raise NotImplementedError

    def get_input_embeddings(self) -> nn.Embedding:  # pragma: no cover - abstract
        raise NotImplementedError

    # Structure used by adaptation modes (freezing, layer-wise learning rates, adapters).
    def layer_modules(self) -> list[nn.Module]:
        """The Transformer/LSTM layers, bottom to top."""
        stack = getattr(self, "stack", None)
        if stack is not None and hasattr(stack, "layers"):
            return list(stack.layers)
        from ptmlab.contracts import ConfigError

        raise ConfigError(f"{type(self).__name__} does not expose its layers for this adaptation mode")

    def layer_stacks(self) -> list[nn.Module]:
        """The separately numbered stacks of layers (each with `layer_modules()` and `num_layers`):
        the backbone itself; an encoder–decoder's encoder and decoder (layer dropping, distillation)."""
        return [self]

    def embedding_modules(self) -> list[nn.Module]:
        embeddings = getattr(self, "embeddings", None)
        return [embeddings] if embeddings is not None else [self.get_input_embeddings()]

    # Export (lightning_modules.artifacts.backbone_export).
    def export_backbone(self, model_cfg: dict) -> tuple[nn.Module, dict]:
        """(the module to keep after training, the model config that rebuilds it): by default the
        whole backbone under its own config. ELECTRA keeps its discriminator; a Hugging Face
        checkpoint points its config at the `hf/` folder it is saved in."""
        return self, model_cfg

    def to_hf(self):
        """The same weights as a Hugging Face model (saved under `hf/` of an export), or None where
        the architecture has no Hugging Face counterpart."""
        return None

    def to_hf_generator(self):
        """The same weights as a Hugging Face model with an LM head tied to the token table that
        `generate()` decodes with (`*ForConditionalGeneration`), or None where there is none: the
        generation task model's logits are the decoder's last states × the token table, and this
        twin's are the same numbers."""
        return None

    def hf_generator_linears(self) -> dict[str, list[str]]:
        """Twin module name -> this backbone's Linear(s) it computes (`to_hf_generator()`'s
        correspondence; several: a fused projection), so an int8 twin can run this backbone's own
        int8 modules (models/int8_twin.py). Empty where there is no twin."""
        return {}

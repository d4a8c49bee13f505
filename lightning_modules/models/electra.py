"""ELECTRA (Clark et al. 2020): a small generator and a discriminator sharing their embeddings.

`ElectraPair` (`family: electra`) holds both as `.generator` and `.discriminator`, each an
`ElectraEncoder`: a post-LN BERT encoder over factorised embeddings of width E, projected to the
encoder's own width only where the two differ (as Hugging Face `ElectraModel`). The two share the
whole E-wide embedding block (token, position and token-type tables and their LayerNorm), as the
paper does; each keeps its own E×H projection, so the generator can be narrower (the paper uses
1/4 of the discriminator's width) while both read and write the same token table.

Objectives: `family: electra` is for replaced-token detection: run the generator's MLM on
`pair.generator` (an MLM head tied to `pair.get_input_embeddings()`, the shared V×E table),
sample replacements, and classify original/replaced on `pair.discriminator`'s states.
`pair(...)` itself is the discriminator's forward, so probes and heads see the model that will be
kept. After pre-training only the discriminator is exported (`export_backbone`, used by
`lightning_modules.artifacts.backbone_export`), as a plain `family: encoder` backbone with its own config,
and `ElectraEncoder.to_hf()` gives the same weights as Hugging Face `ElectraModel`.
"""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.models.albert import FactorisedEmbeddingEncoder
from lightning_modules.models.base import Backbone, BackboneOutput
from lightning_modules.models.transformer import (
    bert_arguments_from_hf,
    bert_config_fields,
    bert_state_dict_from_hf,
    bert_state_dict_to_hf,
)
from ptmlab.contracts import ConfigError
from ptmlab.methods.models import ElectraPairParams

SHARED_EMBEDDINGS = ("word_embeddings", "position_embeddings", "token_type_embeddings", "layer_norm")


class ElectraEncoder(FactorisedEmbeddingEncoder):
    """ELECTRA's encoder (either half of the pair): E-wide embeddings, projected to H iff E != H."""

    always_project = False

    def to_hf(self):
        """The same weights as a Hugging Face `ElectraModel`."""
        if self.activation not in ("gelu", "gelu_new", "relu"):
            return None
        from transformers import ElectraConfig, ElectraModel

        model = ElectraModel(ElectraConfig(**bert_config_fields(self), embedding_size=self.embedding_size))
        state = self.state_dict()
        hf_state = bert_state_dict_to_hf(state)
        if self.embeddings.projection is not None:
            hf_state["embeddings_project.weight"] = state["embeddings.projection.weight"]
            hf_state["embeddings_project.bias"] = state["embeddings.projection.bias"]
        model.load_state_dict(hf_state, strict=True)
        return model.eval()

    @classmethod
    def from_hf(cls, model) -> ElectraEncoder:
        """Build from a Hugging Face `ElectraModel` (a discriminator's or a generator's body)."""
        c = model.config
        encoder = cls(**bert_arguments_from_hf(c), embedding_size=c.embedding_size)
        hf_state = model.state_dict()
        state = bert_state_dict_from_hf(hf_state, c.num_hidden_layers)
        if "embeddings_project.weight" in hf_state:
            state["embeddings.projection.weight"] = hf_state["embeddings_project.weight"]
            state["embeddings.projection.bias"] = hf_state["embeddings_project.bias"]
        encoder.load_state_dict(state, strict=True)
        return encoder


class ElectraPair(Backbone):
    declaration = ElectraPairParams

    family = "electra"
    is_causal = False

    def __init__(
        self,
        vocab_size: int,
        embedding_size: int = 128,
        hidden_size: int = 256,
        num_layers: int = 12,
        num_heads: int = 4,
        intermediate_size: int = 1024,
        generator_hidden_size: int = 64,
        generator_num_layers: int | None = None,
        generator_num_heads: int = 1,
        generator_intermediate_size: int = 256,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
        activation: str = "gelu",
        initializer_range: float = 0.02,
    ):
        super().__init__()
        shared = dict(
            vocab_size=int(vocab_size),
            embedding_size=int(embedding_size),
            max_position_embeddings=int(max_position_embeddings),
            type_vocab_size=int(type_vocab_size),
            dropout=float(dropout),
            attention_dropout=float(attention_dropout),
            layer_norm_eps=float(layer_norm_eps),
            activation=str(activation),
            initializer_range=float(initializer_range),
        )
        self.discriminator_args = dict(
            shared,
            hidden_size=int(hidden_size),
            num_layers=int(num_layers),
            num_heads=int(num_heads),
            intermediate_size=int(intermediate_size),
        )
        generator_args = dict(
            shared,
            hidden_size=int(generator_hidden_size),
            num_layers=int(generator_num_layers or num_layers),
            num_heads=int(generator_num_heads),
            intermediate_size=int(generator_intermediate_size),
        )
        if generator_args["hidden_size"] > self.discriminator_args["hidden_size"]:
            # The paper's finding: a generator as wide as the discriminator makes RTD too hard.
            raise ConfigError(
                f"model.backbone.generator_hidden_size={generator_hidden_size} must not exceed "
                f"model.backbone.hidden_size={hidden_size}"
            )
        self.discriminator = ElectraEncoder(**self.discriminator_args)
        self.generator = ElectraEncoder(**generator_args)
        for name in SHARED_EMBEDDINGS:
            setattr(self.generator.embeddings, name, getattr(self.discriminator.embeddings, name))

        d = self.discriminator
        self.vocab_size, self.hidden_size, self.num_layers = d.vocab_size, d.hidden_size, d.num_layers
        self.embedding_size, self.activation, self.layer_norm_eps = d.embedding_size, d.activation, d.layer_norm_eps

    def get_input_embeddings(self) -> nn.Embedding:
        return self.discriminator.get_input_embeddings()  # shared with the generator

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        **kwargs,
    ) -> BackboneOutput:
        return self.discriminator(input_ids, attention_mask, token_type_ids, output_attentions, **kwargs)

    def export_backbone(self, model_cfg: dict) -> tuple[nn.Module, dict]:
        """What to keep after pre-training: the discriminator alone, with a model config that
        rebuilds exactly it (`family: encoder`, so every encoder task, adaptation and probe takes it)."""
        cfg = {
            "name": model_cfg.get("name", "electra"),
            "family": "encoder",
            "exported_from": model_cfg.get("family", self.family),
            "backbone": {
                "_target_": f"{ElectraEncoder.__module__}.{ElectraEncoder.__qualname__}",
                **self.discriminator_args,
            },
        }
        return self.discriminator, cfg

    def to_hf(self):
        return self.discriminator.to_hf()

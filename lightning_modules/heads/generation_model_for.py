"""Which generation task model a backbone takes (`task.kind: generation`): a Hugging Face LM
checkpoint its own logits (heads/hf_generation_model.py), a causal decoder the source as a prompt
(heads/causal_generation_model.py), a ptmlab Transformer encoder UniLM's seq2seq mask
(heads/unilm_generation_model.py), an encoder–decoder the source as encoder input
(heads/generation_model.py; anything else is refused there, naming the family)."""

from __future__ import annotations

from torch import nn

from lightning_modules.heads.causal_generation_model import CausalGenerationModel
from lightning_modules.heads.generation_model import GenerationModel
from lightning_modules.heads.hf_generation_model import HFGenerationModel
from lightning_modules.heads.unilm_generation_model import UnilmGenerationModel
from lightning_modules.models.transformer import TransformerEncoder


def generation_model_for(backbone: nn.Module, **kwargs) -> GenerationModel:
    if backbone.hf_native:
        return HFGenerationModel(backbone, **kwargs)
    if backbone.is_causal:
        return CausalGenerationModel(backbone, **kwargs)
    if isinstance(backbone, TransformerEncoder):
        return UnilmGenerationModel(backbone, **kwargs)
    return GenerationModel(backbone, **kwargs)

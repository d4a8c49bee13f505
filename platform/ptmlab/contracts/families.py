"""The model families, in one place: the values `model.family` may take.

A family is the shape of computation an architecture offers, which decides what it can be trained
with: objectives list the families they train (`compatible_families` in conf/objective/*.yaml),
ptmlab.config.check_config compares the two at compose time, scripts/compat_table.py tabulates
them, and every backbone class declares one (lightning_modules.models.base.Backbone). Torch-free,
so the API process reads it too.
"""

from __future__ import annotations

FAMILIES: tuple[str, ...] = (
    "lstm",  # bidirectional LSTM LM with separate forward and backward states (ELMo)
    "decoder",  # causal Transformer (GPT)
    "encoder",  # bidirectional Transformer (BERT, ALBERT, UniLM)
    "electra",  # generator + discriminator pair (ELECTRA)
    "permutation",  # two-stream attention (XLNet)
    "encoder_decoder",  # encoder + autoregressive decoder (BART, T5, MASS)
    "hf",  # any Hugging Face checkpoint (AutoModel)
)

"""Prefix tuning on a Hugging Face LM checkpoint under `task.kind: generation`
(models/hf_generator.py `HFGenerator`): the checkpoint computes its logits itself (`lm_logits`),
past the forward hooks ptmlab's own prefixes use, so here the prefix is peft's (`PrefixTuningConfig`,
Li & Liang's past key values at every layer, `prefix_projection` their reparameterising MLP). The
checkpoint becomes a peft model: its `forward` feeds the prefix while training, its `generate()`
while decoding (it stays its own twin), and the task model saves and reloads it like any other
(the loader wraps the fresh checkpoint again before reading the weights; `reparameterize`'s MLP is
folded into the prefix after training, as for ptmlab's own prefixes)."""

from __future__ import annotations

import torch
from torch import nn


def wrap_with_peft_prefix(backbone: nn.Module, num_tokens: int, reparameterize: bool, hidden: int) -> nn.Module:
    """Wraps `backbone.model` in place; returns the prefix's own module (what trains)."""
    from peft import PrefixTuningConfig, TaskType, get_peft_model

    task_type = TaskType.SEQ_2_SEQ_LM if backbone.is_encoder_decoder else TaskType.CAUSAL_LM
    config = PrefixTuningConfig(
        task_type=task_type,
        num_virtual_tokens=int(num_tokens),
        prefix_projection=bool(reparameterize),
        encoder_hidden_size=int(hidden),
    )
    backbone.model = get_peft_model(backbone.model, config)
    return backbone.model.prompt_encoder


@torch.no_grad()
def fold_peft_projection(backbone: nn.Module) -> None:
    """After training: peft's reparameterising MLP replaced by the prefix it produces (P × L·2·H), as
    ptmlab's own prefixes fold theirs, so a saved task model holds the prefix alone and reloads
    without the MLP (`insert_modules` on load builds the plain prefix)."""
    from peft.tuners.prefix_tuning import PrefixEncoder

    peft_model = backbone.model
    config = peft_model.peft_config["default"]
    if not config.prefix_projection:
        return
    encoder = peft_model.prompt_encoder["default"]
    tokens = torch.arange(config.num_virtual_tokens, device=encoder.embedding.weight.device)
    vectors = encoder(tokens[None])[0]  # 1×P -> P×(L·2·H)
    config.prefix_projection = False
    folded = PrefixEncoder(config).to(vectors.device)
    folded.embedding.weight.copy_(vectors)
    folded.embedding.weight.requires_grad_(encoder.embedding.weight.requires_grad)
    peft_model.prompt_encoder["default"] = folded

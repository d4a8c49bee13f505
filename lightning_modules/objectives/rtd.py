"""Replaced-token detection (ELECTRA, Clark et al. 2020) on an `ElectraPair` backbone
(`family: electra`, lightning_modules.models.electra):

    1. mask 15% of the tokens (85% [MASK], 15% kept, no random tokens: ELECTRA's recipe);
    2. the small generator predicts them (MLM loss, head tied to the shared token table);
    3. replacements are SAMPLED from the generator's softmax (no gradient flows through the
       sampling) and put in place of the masked tokens;
    4. the discriminator labels every real token as original (0) or replaced (1); a sampled token
       equal to the original counts as original.

loss = MLM + λ · RTD (binary cross-entropy over real tokens), λ = `rtd_weight` = 50 as in the
paper. Only the discriminator is kept after pre-training (ElectraPair.export_backbone).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.models.transformer import build_activation
from lightning_modules.objectives.base import Objective, ObjectiveOutput, token_loss, zero_loss
from lightning_modules.objectives.masking import IGNORE_INDEX, replace_selected, replacement_pool, select_tokens
from lightning_modules.objectives.mlm import MaskedLMHead, special_tokens_mask_for
from lightning_modules.objectives.seeding import SeededCorruption
from ptmlab.contracts import ConfigError
from ptmlab.methods.objectives import ReplacedTokenDetectionParams


def sample_replacements(logits: torch.Tensor, generator: torch.Generator, temperature: float = 1.0) -> torch.Tensor:
    """N×V logits -> N token ids drawn from softmax(logits / temperature) (Gumbel-max)."""
    u = torch.rand(logits.shape, generator=generator, device=generator.device).to(logits.device)
    gumbel = -torch.log(-torch.log(u.clamp(1e-10, 1.0 - 1e-7)))
    return (logits.float() / temperature + gumbel).argmax(dim=-1)


class DiscriminatorHead(nn.Module):
    """ELECTRA's discriminator head: dense -> activation -> one logit per token."""

    def __init__(self, hidden_size: int, activation: str = "gelu"):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = build_activation(activation)
        self.out = nn.Linear(hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.out(self.activation(self.dense(hidden))).squeeze(-1)  # B×T×H -> B×T


class ReplacedTokenDetectionObjective(Objective):
    declaration = ReplacedTokenDetectionParams

    name = "rtd"
    predicts_tokens = False  # the loss mixes MLM and RTD: not a token NLL, no perplexity

    def __init__(
        self, backbone: nn.Module, tokenizer, params: ReplacedTokenDetectionParams | None = None, **values: Any
    ):
        super().__init__()
        self.params = params = self.declared_params(params, values)
        if tokenizer.mask_token_id is None:
            raise ConfigError("objective=rtd needs a tokenizer with a mask token; tokenizer.mask_token_id is None")
        self.mask_prob, self.mask_token_prob = params.mask_prob, params.mask_token_prob
        self.rtd_weight, self.sampling_temperature = float(params.rtd_weight), float(params.sampling_temperature)
        self.mask_token_id = int(tokenizer.mask_token_id)
        vocab_size, embedding_size = backbone.get_input_embeddings().weight.shape
        special = sorted({int(i) for i in tokenizer.all_special_ids})
        self.register_buffer("special_ids", torch.tensor(special, dtype=torch.long), persistent=False)
        self.register_buffer("replacement_ids", replacement_pool(vocab_size, special), persistent=False)
        self.corruption = SeededCorruption(params.seed)
        self.generator_head = MaskedLMHead(
            backbone.generator.hidden_size,
            embedding_size,
            vocab_size,
            activation=backbone.activation,
            layer_norm_eps=backbone.layer_norm_eps,
        )
        self.discriminator_head = DiscriminatorHead(backbone.hidden_size, backbone.activation)
        g = backbone.generator
        self.generator_attention_flops_per_position = 6.0 * g.num_layers * g.hidden_size

    def training_flops_per_token(self, backbone_flops_per_token: float, seq_len: int) -> float:
        """The pair's 6·N already counts generator and discriminator weights (one pass of each);
        add the generator's attention term, 6·L_g·T·H_g."""
        return backbone_flops_per_token + self.generator_attention_flops_per_position * seq_len

    def forward(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> ObjectiveOutput:
        input_ids, attention_mask = batch["input_ids"], batch.get("attention_mask")
        token_type_ids = batch.get("token_type_ids")
        generator = self.corruption.generator(input_ids.device)
        special = special_tokens_mask_for(input_ids, self.special_ids, attention_mask)
        selected = select_tokens(special, self.mask_prob, generator)
        masked, labels = replace_selected(
            input_ids, selected, self.mask_token_id, self.replacement_ids, generator, self.mask_token_prob, 0.0
        )
        embedding_weight = backbone.get_input_embeddings().weight

        gen_out = backbone.generator(masked, attention_mask, token_type_ids)
        predicted = labels != IGNORE_INDEX
        gen_logits = self.generator_head(gen_out.last_hidden_state[predicted], embedding_weight)  # N×V
        mlm_loss, gen_acc = token_loss(gen_logits, labels[predicted], gen_out.last_hidden_state)

        with torch.no_grad():
            sampled = sample_replacements(gen_logits.detach(), generator, self.sampling_temperature)
        corrupted = input_ids.clone()
        corrupted[predicted] = sampled
        replaced = (corrupted != input_ids).float()  # B×T: 1 = replaced

        disc_out = backbone.discriminator(corrupted, attention_mask, token_type_ids)
        disc_logits = self.discriminator_head(disc_out.last_hidden_state)  # B×T
        real = attention_mask.bool() if attention_mask is not None else torch.ones_like(input_ids, dtype=torch.bool)
        if real.any():
            rtd_loss = F.binary_cross_entropy_with_logits(disc_logits[real].float(), replaced[real])
            rtd_acc = ((disc_logits.detach()[real] > 0).float() == replaced[real]).float().mean()
            replaced_fraction = replaced[real].mean()
        else:  # every row padding: nothing to classify
            rtd_loss = zero_loss(disc_logits)
            rtd_acc = replaced_fraction = rtd_loss.detach()
        return ObjectiveOutput(
            loss=mlm_loss + self.rtd_weight * rtd_loss,
            metrics={
                "mlm_loss": mlm_loss.detach(),
                "rtd_loss": rtd_loss.detach(),
                "generator_acc": gen_acc,
                "rtd_acc": rtd_acc,
                "replaced_fraction": replaced_fraction,
            },
            num_predicted_tokens=int(real.sum()),
        )

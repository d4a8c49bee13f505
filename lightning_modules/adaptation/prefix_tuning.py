"""Prefix tuning (Li & Liang 2021) / P-tuning v2 (Liu et al. 2021): `num_tokens` trained key and
value vectors at every layer of a frozen backbone (adaptation/virtual_tokens.py says how); the
task head trains. `reparameterize=true` trains them through an MLP over `num_tokens` embeddings
(Li & Liang's stabilisation); after training the MLP's output is stored as the prefix, so a saved
task model holds the prefixes alone.

Generators (`task.kind: generation`, Li & Liang's own setting): a GPT decoder takes one prefix
(prompt + target after it); an encoder–decoder (ptmlab's T5, BART) one on each side
(adaptation/seq2seq_prefix.py). Their Hugging Face twins would not carry the prefix, so they decode
on a recomputing twin (heads/recomputing_generator.py). A Hugging Face LM checkpoint computes its
logits past the hooks: it takes peft's prefix tuning instead (adaptation/hf_prefix.py). Refused
(`bind`, before training): UniLM's seq2seq mask (built for the text positions alone)."""

from __future__ import annotations

from typing import Any

from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from lightning_modules.adaptation.hf_prefix import fold_peft_projection, wrap_with_peft_prefix
from lightning_modules.adaptation.seq2seq_prefix import Seq2SeqPrefix
from lightning_modules.adaptation.virtual_tokens import Prefix, key_value_projections, refuse_on_generator
from ptmlab.methods.adaptation import PrefixTuningParams


class PrefixTuning(Adaptation):
    declaration = PrefixTuningParams

    name = "prefix_tuning"

    takes_declaration = True

    def __init__(self, params: PrefixTuningParams | None = None, **values: Any):
        self.params = p = self.declared_params(params, values)
        self.num_tokens, self.reparameterize, self.reparameterize_hidden = (
            p.num_tokens,
            p.reparameterize,
            p.reparameterize_hidden,
        )
        self.max_length = self.max_target_length = None

    def bind(self, task, resolved) -> None:
        self.max_length = task.spec.max_length
        if task.spec.is_generation:
            refuse_on_generator(resolved.backbone, self.name, encoder_decoder_ok=True, hf_ok=True)
            if resolved.backbone.is_causal:  # the prompt and the target are one sequence after the prefix
                self.max_length += int(task.spec.max_target_length)
            else:
                self.max_target_length = int(task.spec.max_target_length)

    def insert_modules(self, model: nn.Module, reparameterize: bool = False) -> list[nn.Module]:
        backbone = model.backbone
        if hasattr(backbone, "lm_logits"):  # a Hugging Face LM under a generation task: peft's prefix
            return [wrap_with_peft_prefix(backbone, self.num_tokens, reparameterize, self.reparameterize_hidden)]
        if backbone.family == "encoder_decoder":
            prefix = Seq2SeqPrefix(
                self.num_tokens,
                backbone.encoder,
                backbone.decoder,
                reparameterize=reparameterize,
                hidden=self.reparameterize_hidden,
            )
            prefix.install(model, self.max_length, self.max_target_length)
            return [prefix]
        pairs = key_value_projections(backbone)
        prefix = Prefix(
            self.num_tokens,
            len(pairs),
            pairs[0][0].out_features,
            reparameterize=reparameterize,
            hidden=self.reparameterize_hidden,
        )
        prefix.install(model, self.max_length)
        return [prefix]

    def prepare(self, model: nn.Module) -> None:
        set_trainable([model.backbone], False)
        (inserted,) = self.insert_modules(model, reparameterize=self.reparameterize)
        set_trainable([inserted, model.head], True)
        for prefix in prefixes(model):
            if prefix.mlp is not None:  # the MLP produces the prefix while training
                prefix.prefix.requires_grad_(False)

    def delta_state(self, model: nn.Module) -> dict:
        """The head and the prefixes themselves (what is kept after the MLP is folded away)."""
        if not hasattr(model, "virtual_tokens"):  # peft's prefix (a Hugging Face LM): what trains
            return super().delta_state(model)
        state = {k: v for k, v in super().delta_state(model).items() if not k.startswith("virtual_tokens.")}
        kept = {
            f"virtual_tokens.{name + '.' if name else ''}prefix": prefix.vectors().detach()
            for name, prefix in model.virtual_tokens.named_modules()
            if isinstance(prefix, Prefix)
        }
        return {**state, **kept}

    def finalize(self, model: nn.Module) -> None:
        for prefix in prefixes(model):
            prefix.fold_reparameterization()
        if hasattr(model.backbone, "lm_logits") and hasattr(model.backbone.model, "peft_config"):
            fold_peft_projection(model.backbone)


def prefixes(model: nn.Module) -> list[Prefix]:
    """Every Prefix the model carries (one; an encoder–decoder's two; none under peft's)."""
    holder = getattr(model, "virtual_tokens", None)
    return [m for m in holder.modules() if isinstance(m, Prefix)] if holder is not None else []

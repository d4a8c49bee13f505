"""Prefix tuning (Li & Liang 2021) / P-tuning v2 (Liu et al. 2021): `num_tokens` trained key and
value vectors at every layer of a frozen backbone (adaptation/virtual_tokens.py says how); the
task head trains. `reparameterize=true` trains them through an MLP over `num_tokens` embeddings
(Li & Liang's stabilisation); after training the MLP's output is stored as the prefix, so a saved
task model holds the prefixes alone."""

from __future__ import annotations

from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from lightning_modules.adaptation.virtual_tokens import Prefix, key_value_projections


class PrefixTuning(Adaptation):
    name = "prefix_tuning"

    def __init__(self, num_tokens: int = 16, reparameterize: bool = False, reparameterize_hidden: int = 512):
        self.num_tokens, self.reparameterize = int(num_tokens), bool(reparameterize)
        self.reparameterize_hidden = int(reparameterize_hidden)
        self.max_length = None

    def bind(self, task, resolved) -> None:
        self.max_length = task.spec.max_length

    def insert_modules(self, model: nn.Module, reparameterize: bool = False) -> list[nn.Module]:
        pairs = key_value_projections(model.backbone)
        prefix = Prefix(self.num_tokens, len(pairs), pairs[0][0].out_features, reparameterize=reparameterize,
                        hidden=self.reparameterize_hidden)
        prefix.install(model, self.max_length)
        return [prefix]

    def prepare(self, model: nn.Module) -> None:
        set_trainable([model.backbone], False)
        (prefix,) = self.insert_modules(model, reparameterize=self.reparameterize)
        set_trainable([prefix, model.head], True)
        if prefix.mlp is not None:  # the MLP produces the prefix while training
            prefix.prefix.requires_grad_(False)

    def delta_state(self, model: nn.Module) -> dict:
        """The head and the prefixes themselves (what is kept after the MLP is folded away)."""
        state = {k: v for k, v in super().delta_state(model).items() if not k.startswith("virtual_tokens.")}
        return {**state, "virtual_tokens.prefix": model.virtual_tokens.vectors().detach()}

    def finalize(self, model: nn.Module) -> None:
        model.virtual_tokens.fold_reparameterization()

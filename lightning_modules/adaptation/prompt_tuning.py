"""Prompt tuning (Lester et al. 2021): `num_tokens` trained vectors prepended to the input
embeddings of a frozen backbone (adaptation/virtual_tokens.py says how, for any backbone); the
task head trains. The vectors start from

    random   N(0, std of the embedding matrix)
    vocab    the embeddings of `num_tokens` vocabulary entries drawn at random (Lester et al.'s
             best initialisation besides class labels)
    words    the embeddings of `init_words` (each word's first token, cycled to num_tokens)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from lightning_modules.adaptation.virtual_tokens import SoftPrompt, refuse_on_generator
from ptmlab.contracts import ConfigError
from ptmlab.methods.adaptation import PromptTuningParams


class PromptTuning(Adaptation):
    declaration = PromptTuningParams

    name = "prompt_tuning"

    takes_declaration = True

    def __init__(self, params: PromptTuningParams | None = None, **values: Any):
        self.params = p = self.declared_params(params, values)  # init's values and init_words: its rules
        self.num_tokens, self.init, self.init_words = p.num_tokens, p.init, list(p.init_words or [])
        self.tokenizer = None
        self.max_length = None

    def bind(self, task, resolved) -> None:
        self.tokenizer, self.max_length = resolved.tokenizer, task.spec.max_length
        if task.spec.is_generation:  # a GPT only; it decodes on a recomputing twin (heads/generation_model.py)
            refuse_on_generator(resolved.backbone, self.name, encoder_decoder_ok=False)
            self.max_length += int(task.spec.max_target_length)

    def insert_modules(self, model: nn.Module) -> list[nn.Module]:
        embedding = model.backbone.get_input_embeddings()
        prompt = SoftPrompt(self.num_tokens, embedding.weight.shape[1])
        prompt.install(model, self.max_length)
        return [prompt]

    def prepare(self, model: nn.Module) -> None:
        set_trainable([model.backbone], False)
        (prompt,) = self.insert_modules(model)
        with torch.no_grad():
            prompt.embeddings.copy_(self._initial(model.backbone.get_input_embeddings().weight.detach()))
        set_trainable([prompt, model.head], True)

    def _initial(self, table: torch.Tensor) -> torch.Tensor:
        """P×E starting vectors from the V×E embedding table."""
        generator = torch.Generator().manual_seed(torch.initial_seed() % 2**63)
        if self.init == "random":
            return torch.randn(self.num_tokens, table.shape[1], generator=generator) * table.std()
        if self.init == "vocab":
            ids = torch.randint(0, table.shape[0], (self.num_tokens,), generator=generator)
            return table[ids].clone()
        ids = []
        for word in self.init_words:
            pieces = self.tokenizer(word, add_special_tokens=False)["input_ids"] if self.tokenizer else []
            if not pieces or pieces[0] == getattr(self.tokenizer, "unk_token_id", None):
                raise ConfigError(f"adaptation.init_words: '{word}' is not in the tokenizer's vocabulary")
            ids.append(pieces[0])
        ids = (ids * self.num_tokens)[: self.num_tokens]
        return table[torch.tensor(ids)].clone()

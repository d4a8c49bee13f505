"""The task model of `task.kind: generation` on a decoder-only backbone (ptmlab's GPT presets,
models/transformer.py `TransformerDecoder`): the source is the prompt and the target its
continuation in one sequence (tasks/prompt_encoding.py), the last states projected on the token
table (GPT-2's tied LM head), the loss on the target tokens only. Decoding is `generate()` on the
backbone's `to_hf_generator()` twin (GPT2LMHeadModel, the same weights), continuing each prompt
until the end token; only the continuation is the output (heads/generation_model.py decode_items).

    model(batch)    B×T×V next-token logits over prompt + target (labels: tasks/prompt_encoding.py)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.heads.generation_model import GenerationModel
from lightning_modules.tasks.prompt_encoding import PromptEncoder
from ptmlab.contracts import ConfigError


class CausalGenerationModel(GenerationModel):
    @staticmethod
    def check_backbone(backbone: nn.Module) -> None:
        if not getattr(backbone, "is_causal", False):
            raise ConfigError(
                f"a decoder-only generation model needs a causal backbone; {type(backbone).__name__} attends both ways"
            )

    def input_encoder(self, tokenizer, max_length: int, *, doc_stride: int | None = None) -> PromptEncoder:
        return PromptEncoder(
            tokenizer,
            max_source_length=max_length,
            max_target_length=self.max_target_length,
            source_prefix=self.source_prefix,
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        states = self.head(self.backbone(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state)
        return F.linear(states, self.backbone.get_input_embeddings().weight)  # B×T×H -> B×T×V

    def step_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_width: int) -> torch.Tensor:
        """B×T×V for a left-padded prompt + generated tokens: positions count real tokens only, as in
        the right-padded training rows (what the recomputing twin calls)."""
        positions = (attention_mask.cumsum(dim=-1) - 1).clamp(min=0)  # B×T
        states = self.backbone(input_ids, attention_mask=attention_mask, position_ids=positions).last_hidden_state
        return F.linear(self.head(states), self.backbone.get_input_embeddings().weight)  # B×T×H -> B×T×V

    def recomputing_generator(self):
        from lightning_modules.heads.recomputing_generator import RecomputingGenerator  # transformers: decoding

        return RecomputingGenerator(
            self.step_logits, self.head_sizes[self.task_name or "task"], next(self.parameters()).device
        )

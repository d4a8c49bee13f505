"""The task model of `task.kind: generation` on a Hugging Face seq2seq or causal LM checkpoint
(models/hf_generator.py `HFGenerator`): the checkpoint's own logits, trained with teacher forcing
(a seq2seq model on tasks/seq2seq_encoding.py batches, a causal one on tasks/prompt_encoding.py's
prompt + target), decoded by `generate()` on the same model (it is its own twin).

    model(batch)    B×T×V logits, the checkpoint's LM head (the dropout `head` does not apply:
                    the head is inside the checkpoint)
"""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.heads.generation_model import GenerationModel
from lightning_modules.models.hf_generator import HFGenerator
from lightning_modules.tasks.prompt_encoding import PromptEncoder
from lightning_modules.tasks.seq2seq_encoding import Seq2SeqEncoder
from ptmlab.contracts import ConfigError


class HFGenerationModel(GenerationModel):
    @staticmethod
    def check_backbone(backbone: nn.Module) -> None:
        if not isinstance(backbone, HFGenerator):
            raise ConfigError(
                f"{type(backbone).__name__} has no LM head: a Hugging Face checkpoint generates "
                "when loaded as models/hf_generator.py HFGenerator (task.kind=generation does that)"
            )

    def input_encoder(self, tokenizer, max_length: int, *, doc_stride: int | None = None) -> Seq2SeqEncoder:
        kwargs = {
            "max_source_length": max_length,
            "max_target_length": self.max_target_length,
            "source_prefix": self.source_prefix,
        }
        if not self.backbone.is_encoder_decoder:
            return PromptEncoder(tokenizer, **kwargs)
        encoder = Seq2SeqEncoder(tokenizer, **kwargs)
        start = self.backbone.config.decoder_start_token_id  # what the checkpoint was trained to start from
        encoder.decoder_start_id = encoder.decoder_start_id if start is None else int(start)
        return encoder

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.backbone.lm_logits(batch)  # B×T×V

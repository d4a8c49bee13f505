"""The task model of `task.kind: generation` on a ptmlab Transformer encoder, UniLM's way (Dong et
al. 2019, §2.3 and §3.2): source and target are one sequence (tasks/prompt_encoding.py: `[CLS]
source <delim>` then `target [SEP]`), the source as segment 0 attending both ways within itself,
the target as segment 1 seeing the whole source and its own prefix — the seq2seq self-attention
mask the UniLM objective pre-trains with (models/unilm.py `unilm_attention_mask`). Each position's
state projected on the token table predicts the next token, with the loss on the target only (the
prompt encoder's labels), so decoding is continuing the prompt one token at a time. No Hugging Face
model has this mask: `hf_generator()` is a recomputing twin (heads/recomputing_generator.py) that
lets `generate()` search over this model's own logits.

Any ptmlab `TransformerEncoder` takes it (UniLM starts from BERT); one pre-trained with
`objective=unilm` has seen the mask before.

    model(batch)    B×T×V next-token logits over prompt + target
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.heads.causal_generation_model import CausalGenerationModel
from lightning_modules.models.transformer import TransformerEncoder
from lightning_modules.models.unilm import unilm_attention_mask
from ptmlab.contracts import ConfigError


class UnilmGenerationModel(CausalGenerationModel):
    @staticmethod
    def check_backbone(backbone: nn.Module) -> None:
        if not isinstance(backbone, TransformerEncoder):
            raise ConfigError(
                f"UniLM's seq2seq generation needs a ptmlab Transformer encoder (model=unilm_tiny, "
                f"bert_tiny ...); {type(backbone).__name__} takes no self-attention mask"
            )

    def seq2seq_logits(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        source_lengths: torch.Tensor,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """B×T×V: the first `source_lengths[b]` columns of row b are the source (segment 0)."""
        columns = torch.arange(input_ids.shape[1], device=input_ids.device)
        token_type_ids = (columns[None, :] >= source_lengths[:, None]).long()  # B×T: 0 source, 1 target
        allowed = unilm_attention_mask("seq2seq", attention_mask, source_lengths=source_lengths)  # B×T×T
        out = self.backbone(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            self_attention_mask=allowed,
            position_ids=position_ids,
        )
        return F.linear(self.head(out.last_hidden_state), self.backbone.get_input_embeddings().weight)  # B×T×V

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        # right-padded prompt + target: the prompt's own length is where the target segment starts
        return self.seq2seq_logits(
            batch["input_ids"], batch["attention_mask"], batch["prompt_attention_mask"].sum(dim=1)
        )

    def step_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_width: int) -> torch.Tensor:
        """The same logits for a left-padded prompt of `prompt_width` columns + generated tokens:
        positions count real tokens only (as in the right-padded training rows), padding is never a key."""
        positions = (attention_mask.cumsum(dim=-1) - 1).clamp(min=0)  # B×T
        widths = torch.full((input_ids.shape[0],), int(prompt_width), device=input_ids.device)
        return self.seq2seq_logits(input_ids, attention_mask, widths, position_ids=positions)

    def hf_generator(self):
        return self.recomputing_generator()  # no Hugging Face model has this mask

"""Any Hugging Face seq2seq or causal LM checkpoint with its LM head, for `task.kind: generation`
(`model=hf model.name_or_path=<folder>` under a generation task: artifacts/backbone_reference.py
builds this instead of HFBackbone). The head is the checkpoint's own (tied or not, T5's output
scaling, BART's final_logits_bias), so the task model trains the very logits `generate()` decodes:
the model is its own Hugging Face twin (`to_hf_generator`), nothing is converted.

    lm_logits(batch)   B×T×V: seq2seq from input_ids/attention_mask + decoder_input_ids/
                       decoder_attention_mask (tasks/seq2seq_encoding.py), causal from
                       input_ids/attention_mask (tasks/prompt_encoding.py)
"""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.models.hf import LAYER_CONTAINERS, HFBackbone, _get_attr_path


class HFGenerator(HFBackbone):
    def __init__(
        self,
        name_or_path: str,
        pretrained: bool = True,
        vocab_size: int | None = None,
        attn_implementation: str = "sdpa",
    ):
        super().__init__(name_or_path, pretrained, vocab_size, attn_implementation)
        self.is_encoder_decoder = bool(getattr(self.config, "is_encoder_decoder", False))
        self.is_causal = not self.is_encoder_decoder
        self.hidden_size = int(
            getattr(self.config, "hidden_size", None)
            or getattr(self.config, "d_model", 0)
            or getattr(self.config, "n_embd", 0)
        )

    def auto_class(self, config) -> tuple[type, dict]:
        from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

        return (AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else AutoModelForCausalLM), {}

    def lm_logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        if self.is_encoder_decoder:
            inputs.update(
                decoder_input_ids=batch["decoder_input_ids"], decoder_attention_mask=batch["decoder_attention_mask"]
            )
        return self.model(**inputs, use_cache=False, return_dict=True).logits  # B×T×V

    def layer_modules(self) -> list[nn.Module]:
        """The base model's layers (an LM wraps it: GPT2LMHeadModel.transformer.h); a seq2seq
        model's encoder blocks, then its decoder blocks."""
        if self.is_encoder_decoder:
            stacks = [getattr(self.model.get_encoder(), name, None) for name in ("block", "layers", "layer")]
            decoder = self.model.get_decoder()
            stacks += [getattr(decoder, name, None) for name in ("block", "layers", "layer")]
            layers = [layer for stack in stacks if isinstance(stack, nn.ModuleList) for layer in stack]
            if layers:
                return layers
        for path in LAYER_CONTAINERS:
            container = _get_attr_path(self.model.base_model, path)
            if isinstance(container, nn.ModuleList):
                return list(container)
        return super().layer_modules()

    def to_hf_generator(self):
        return self.model

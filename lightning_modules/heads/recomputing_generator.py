"""A `generate()` twin for a task model that has no Hugging Face counterpart (UniLM's seq2seq mask;
a prompt whose virtual tokens a converted twin would not carry): a `PreTrainedModel` whose forward
recomputes the task model's next-token logits over prompt + continuation at every step (no key/value
cache), so Hugging Face's own `generate()` runs the search — greedy, beam search with its length
penalty and early stopping, no-repeat n-grams and sampling are the library's, not re-implemented.

The cost is a full forward per new token (quadratic in the output length): fine for the short
outputs of tiny and small models; `bench/generation.py` measures the cached twins.

    RecomputingGenerator(step_logits, vocab_size, device)
        step_logits(input_ids, attention_mask, prompt_width) -> B×T×V
            input_ids   B×T  the left-padded prompt (its first `prompt_width` columns) + the tokens
                             generated so far (tasks/prompt_encoding.py `PromptEncoder.generate`)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

StepLogits = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]


class RecomputingGenerator(PreTrainedModel, GenerationMixin):
    config_class = PretrainedConfig

    def __init__(self, step_logits: StepLogits, vocab_size: int, device: torch.device):
        super().__init__(PretrainedConfig(vocab_size=int(vocab_size), is_encoder_decoder=False))
        # a plain attribute, not a submodule: the task model's train/eval mode and parameters stay its own
        self.__dict__["step_logits"] = step_logits
        self._device, self.prompt_width = torch.device(device), None

    @property
    def device(self) -> torch.device:
        return self._device

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_) -> CausalLMOutput:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return CausalLMOutput(logits=self.step_logits(input_ids, attention_mask, self.prompt_width))

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, **kwargs) -> torch.Tensor:
        self.prompt_width = int(input_ids.shape[1])  # beams repeat rows, never columns: the prompt stays this wide
        return super().generate(input_ids=input_ids, use_cache=False, **kwargs)


class Seq2SeqRecomputingGenerator(RecomputingGenerator):
    """The same for an encoder–decoder task model: `generate()` runs its decoder-only search over the
    decoder's tokens (from the start token), the source riding along as model inputs (`generate()`
    repeats them per beam), and every step recomputes encoder and decoder.

        step_logits(decoder_ids, decoder_mask, source_ids, source_mask) -> B×T×V
    Output: the start token, then the generated tokens (as an encoder–decoder's `generate()`)."""

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        source_ids: torch.Tensor | None = None,
        source_attention_mask: torch.Tensor | None = None,
        **_,
    ) -> CausalLMOutput:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return CausalLMOutput(logits=self.step_logits(input_ids, attention_mask, source_ids, source_attention_mask))

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        decoder_start_token_id: int = 0,
        **kwargs,
    ) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        start = torch.full(
            (input_ids.shape[0], 1), int(decoder_start_token_id), dtype=torch.long, device=input_ids.device
        )  # B×1: every row starts from the decoder's start token
        return GenerationMixin.generate(
            self,
            input_ids=start,
            attention_mask=torch.ones_like(start),
            use_cache=False,
            source_ids=input_ids,
            source_attention_mask=attention_mask,
            **kwargs,
        )

"""The task model of `task.kind: generation` on an encoder–decoder (T5, BART; MASS pre-trains the
same `TransformerEncoderDecoder`): the backbone's decoder states projected on its token table,
trained with teacher forcing, decoded with Hugging Face `generate()` on the backbone's
`to_hf_generator()` twin (the same weights; greedy, beam search, sampling: ptmlab/contracts/decoding.py).

`head` is the dropout before the projection (no weights of its own: the LM head is the shared
token table, as in T5 and BART), so the task-model export (artifacts/saved_task_model.py) saves
and reloads it like any single-head model; `head_sizes` is the vocabulary.

    model(batch)                          B×T×V teacher-forced logits (tasks/seq2seq_encoding.py batches)
    decode_split(model, tok, task, split, settings)
                                          every output of a split, in order, with timings
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.adaptation.lora import has_lora, merge_lora
from lightning_modules.heads.pooling import SingleHeadModel
from lightning_modules.models.int8_twin import dynamic_int8_modules, int8_twin
from lightning_modules.tasks.seq2seq_encoding import Seq2SeqEncoder
from ptmlab.contracts import ConfigError
from ptmlab.contracts.decoding import DecodingSettings


class GenerationModel(SingleHeadModel):
    def __init__(
        self,
        backbone: nn.Module,
        task_name: str | None = None,
        head_dropout: float = 0.0,
        max_target_length: int = 128,
        source_prefix: str | None = None,
        pooling: str = "tokens",
        scalar_mix: bool = False,
    ):
        self.check_backbone(backbone)
        if scalar_mix:
            raise ConfigError(
                "task.kind=generation: the decoder reads the encoder's last layer; "
                "a scalar-mix (feature-based) adaptation does not apply"
            )
        super().__init__(backbone, pooling="tokens")
        self.task_name = task_name
        self.head = nn.Sequential(nn.Dropout(head_dropout))
        self.max_target_length, self.source_prefix = int(max_target_length), source_prefix

    @staticmethod
    def check_backbone(backbone: nn.Module) -> None:
        if getattr(backbone, "family", None) != "encoder_decoder":
            raise ConfigError(
                f"task.kind=generation needs an encoder-decoder (model=t5_tiny, bart_tiny ...), a "
                f"decoder (model=gpt_tiny ...), a Transformer encoder under UniLM's seq2seq mask "
                f"(model=unilm_tiny ...) or a Hugging Face LM (model=hf); "
                f"{type(backbone).__name__} is family {getattr(backbone, 'family', '?')}"
            )

    def input_encoder(self, tokenizer, max_length: int, *, doc_stride: int | None = None) -> Seq2SeqEncoder:
        return Seq2SeqEncoder(
            tokenizer,
            max_source_length=max_length,
            max_target_length=self.max_target_length,
            source_prefix=self.source_prefix,
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = self.backbone(
            batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=batch["decoder_input_ids"],
            decoder_attention_mask=batch["decoder_attention_mask"],
        )
        states = self.head(out.decoder_last_hidden_state)  # B×T×H
        return F.linear(states, self.backbone.get_input_embeddings().weight)  # B×T×V

    @property
    def head_sizes(self) -> dict[str, int]:
        return {self.task_name or "task": int(self.backbone.get_input_embeddings().weight.shape[0])}

    def hf_generator(self):
        """The Hugging Face twin `generate()` runs on (the current weights, eval mode, same device).
        A model with virtual tokens (prefix tuning) decodes on a recomputing twin instead: a
        converted one would not carry them."""
        if getattr(self, "virtual_tokens", None) is not None:
            return self.recomputing_generator()
        from transformers.initialization import no_init_weights

        backbone = self.backbone
        if has_lora(backbone):  # the twin takes plain weights: B·A folded into W, on a copy (training goes on)
            backbone = copy.deepcopy(backbone)
            merge_lora(backbone)
        with no_init_weights():  # every weight is ours, loaded right after: a random init first is wasted time
            # int8 Linears (compression=quantize_dynamic): the twin runs them (models/int8_twin.py)
            twin = (
                int8_twin(backbone)
                if dynamic_int8_modules(backbone) and not backbone.hf_native
                else backbone.to_hf_generator()
            )
        if twin is None:
            raise ConfigError(
                f"{type(self.backbone).__name__} has no Hugging Face generation counterpart (a pre-LN "
                "BART, a post-LN GPT: model.backbone.pre_layer_norm): decoding it needs a hand-written "
                "decoder, not built yet"
            )
        return twin.to(next(self.parameters()).device).eval()

    def recomputing_generator(self):
        """A `generate()` twin over this model's own forward (heads/recomputing_generator.py)."""
        from lightning_modules.heads.recomputing_generator import Seq2SeqRecomputingGenerator  # transformers: decoding

        def step_logits(decoder_ids, decoder_mask, source_ids, source_mask):
            return self(
                {
                    "input_ids": source_ids,
                    "attention_mask": source_mask,
                    "decoder_input_ids": decoder_ids,
                    "decoder_attention_mask": decoder_mask,
                }
            )

        return Seq2SeqRecomputingGenerator(
            step_logits, self.head_sizes[self.task_name or "task"], next(self.parameters()).device
        )


@dataclass
class Decoded:
    outputs: list[str]
    output_ids: list[list[int]]
    new_tokens: int  # generated sub-words, end tokens included, padding not
    seconds: float

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def latency_ms_per_example(self) -> float:
        return 1000.0 * self.seconds / max(len(self.outputs), 1)


def continuations(encoder, rows: list[list[int]]) -> list[list[int]]:
    """Each generated row up to and including its end token (what follows is padding)."""
    return [row[: row.index(encoder.eos_id) + 1] if encoder.eos_id in row else row for row in rows]


@torch.no_grad()
def decode_items(
    model: GenerationModel,
    tokenizer,
    encoder: Seq2SeqEncoder,
    items: list[dict],
    settings: DecodingSettings,
    batch_size: int = 64,
) -> Decoded:
    """Decode encoded items in order: outputs as text (special tokens dropped)."""
    twin = model.hf_generator()
    device = twin.device
    rows: list[list[int]] = []
    new_tokens = 0
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(settings.seed)  # sampling is seeded; greedy and beam draw nothing
        started = time.perf_counter()
        for start in range(0, len(items), int(batch_size)):
            batch = {k: v.to(device) for k, v in encoder.collate(items[start : start + int(batch_size)]).items()}
            for row in continuations(encoder, encoder.generate(twin, batch, settings).tolist()):
                rows.append(row)
                new_tokens += len(row)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - started
    texts = tokenizer.batch_decode(rows, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    return Decoded([t.strip() for t in texts], rows, new_tokens, seconds)


def decode_split(
    model: GenerationModel, tokenizer, task, split: str, settings: DecodingSettings | None = None, batch_size: int = 64
) -> Decoded:
    """Every output of `task`'s split `split` (a LoadedTask), in split order, in eval mode."""
    settings = settings or DecodingSettings.from_dict(task.spec.generation)
    encoder = model.input_encoder(tokenizer, task.spec.max_length)
    items = encoder.encode([ex.texts for ex in task.data.splits[split].examples])
    for i, item in enumerate(items):
        item["example_index"] = i
    was_training = model.training
    model.eval()
    try:
        return decode_items(model, tokenizer, encoder, items, settings, batch_size)
    finally:
        model.train(was_training)

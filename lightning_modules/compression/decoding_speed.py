"""What a generator's compression is measured by besides its metric: decoding, not one forward pass.

`decoding_latencies` times `generate()` (the task's decoding settings, on each model's Hugging Face
twin: an int8 model's twin runs its int8 Linears) on the first `batch_size` dev sources at each
batch size and thread count, source and compressed alternating (compression/timing.py): per
point the median milliseconds per batch, examples/s, and generated sub-words/s (end tokens
included, padding not). `scored_decoding` decodes the whole dev split once, as `evaluate` does (the
same batches: int8 activations are quantized per batch), and returns its metrics beside the
split's decoding speed (each measurement's `generation` in the summary).
"""

from __future__ import annotations

import torch

from lightning_modules.compression.timing import alternating_latencies
from lightning_modules.heads.evaluation import EVAL_BATCH_SIZE
from lightning_modules.heads.generation_model import continuations, decode_split
from lightning_modules.tasks.generation_metrics import score_split
from ptmlab.contracts.decoding import DecodingSettings


def scored_decoding(loaded, task, split: str) -> tuple[dict, dict]:
    """(metrics, the summary's generation numbers) of a loaded generator on a labelled split."""
    settings = DecodingSettings.from_dict(task.spec.generation)
    decoded = decode_split(loaded.model, loaded.tokenizer, task, split, settings, batch_size=EVAL_BATCH_SIZE)
    metrics, signatures = score_split(task, split, decoded.outputs)
    return metrics, {
        "decoding": settings.to_dict(),
        "metric_signatures": signatures,
        "generated_tokens": decoded.new_tokens,
        "tokens_per_s": round(decoded.tokens_per_s, 3),
        "latency_ms_per_example": round(decoded.latency_ms_per_example, 3),
    }


def decoding_latencies(loaded_models: list, task, measure) -> list[dict]:
    """Per model: {"b{batch}_t{threads}": {latency_ms, throughput, tokens_per_s, threads, batch_size}}."""
    settings = DecodingSettings.from_dict(task.spec.generation)
    examples = task.data.splits[task.eval_splits[0].name].examples
    twins = [loaded.model.hf_generator() for loaded in loaded_models]
    encoders = [loaded.model.input_encoder(loaded.tokenizer, task.spec.max_length) for loaded in loaded_models]

    def prepare(batch_size: int) -> list:
        sources = [examples[i % len(examples)].texts for i in range(batch_size)]
        calls = []
        for twin, encoder in zip(twins, encoders):
            items = encoder.encode(sources)
            for i, item in enumerate(items):
                item["example_index"] = i
            batch = encoder.collate(items)
            calls.append(lambda twin=twin, encoder=encoder, batch=batch: encoder.generate(twin, batch, settings))
        return calls

    def generated_tokens(i: int, rows: torch.Tensor) -> int:
        return sum(len(row) for row in continuations(encoders[i], rows.tolist()))

    return alternating_latencies(prepare, measure, generated_tokens)

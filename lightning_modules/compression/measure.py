"""The one measurement of compression: every compressed model and its source, measured in the
same process with the same settings, side by side.

For each model: total and nonzero parameters (quantized weights included), the serialized size
of its saved task model (model.safetensors) and of its non-embedding tensors, estimated FLOPs
per example at the measured sequence length (2·in·out per token for every Linear actually run,
plus 2·2·T²·(heads·head_dim) for attention scores and context), the task score on the full dev
split, and latency: the median of `repeats` timed forward passes after `warmup`, at each batch
size and thread count, source and compressed alternating (and swapping which goes first) so
machine noise hits both. Throughput = batch ÷ latency. The settings (device, threads, batch,
sequence length, CPU model and ISA flags, quantized engine) are returned with the numbers:
int8 speed-ups flip sign between CPUs, so a latency without its settings is not a result.
A generator is timed decoding instead (compression/decoding_speed.py; `latency_of` says which),
its FLOPs are one teacher-forced pass of `seq_len` source and target tokens.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from lightning_modules.artifacts.quantization import quantized_counts
from lightning_modules.artifacts.structural_edits import attention_heads
from lightning_modules.compression.decoding_speed import decoding_latencies, scored_decoding
from lightning_modules.compression.timing import all_cores, alternating_latencies
from lightning_modules.heads.evaluation import evaluate

ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_int8", "amx_bf16", "avx_vnni")


@dataclass
class MeasureSettings:
    seq_len: int = 64
    batch_sizes: list[int] = field(default_factory=lambda: [1, 32])
    threads: list[int] = field(default_factory=lambda: [1, 0])  # 0: all cores
    warmup: int = 5
    repeats: int = 30
    score: bool = True

    @classmethod
    def from_cfg(cls, node) -> MeasureSettings:
        node = dict(node or {})
        return cls(
            seq_len=int(node.get("seq_len", 64)),
            batch_sizes=[int(b) for b in node.get("batch_sizes", [1, 32])],
            threads=[int(t) for t in node.get("threads", [1, 0])],
            warmup=int(node.get("warmup", 5)),
            repeats=int(node.get("repeats", 30)),
            score=bool(node.get("score", True)),
        )


def cpu_description() -> dict:
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and ":" in line:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and ":" in line:
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return {"cpu": model, "isa": [f for f in ISA_FLAGS if f in flags], "cores": os.cpu_count()}


# -- static numbers --------------------------------------------------------------------------------
def parameter_counts(model: nn.Module) -> tuple[int, int]:
    """(total, nonzero) over parameters and quantized weights."""

    total = sum(p.numel() for p in model.parameters())
    nonzero = sum(int(torch.count_nonzero(p.detach())) for p in model.parameters())
    q_total, q_nonzero = quantized_counts(model)
    return total + q_total, nonzero + q_nonzero


def serialized_sizes(folder: Path) -> tuple[int, int]:
    """(bytes of model.safetensors, bytes of its non-embedding tensors) of a saved task model."""
    from safetensors import safe_open

    path = Path(folder) / "model.safetensors"
    non_embedding = 0
    with safe_open(str(path), framework="pt") as f:
        for key in f.keys():
            if "embed" in key:
                continue
            sl = f.get_slice(key)
            numel = 1
            for d in sl.get_shape():
                numel *= int(d)
            non_embedding += numel * _dtype_bytes(sl.get_dtype())
    return path.stat().st_size, non_embedding


def _dtype_bytes(name: str) -> int:
    name = name.upper()
    return {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "F16": 2, "BF16": 2, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}.get(
        name, 4
    )


@torch.no_grad()
def flops_per_example(model: nn.Module, batch: dict[str, torch.Tensor]) -> float:
    """Estimated forward FLOPs for one example of `batch` (module docstring)."""

    total = 0.0

    def hook(module, inputs, output):
        nonlocal total
        x = inputs[0]
        tokens = x.numel() // max(int(module.in_features), 1)
        total += 2.0 * module.in_features * module.out_features * tokens

    handles = [
        m.register_forward_hook(hook)
        for m in model.modules()
        if hasattr(m, "in_features")
        and hasattr(m, "out_features")
        and not any(hasattr(c, "in_features") for c in m.children())
    ]  # LowRankLinear: its two factors
    try:
        model(batch)
    finally:
        for h in handles:
            h.remove()
    b, t = batch["input_ids"].shape
    try:
        heads = attention_heads(model.backbone)
        total += sum(2 * 2.0 * t * t * h.num_heads * h.head_dim for h in heads) * b
    except Exception:
        pass
    return total / b


def dummy_batch(batch_size: int, seq_len: int, vocab_size: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random ids; an encoder–decoder generator reads the same ids as its decoder's (a teacher-forced
    pass); a multiple-choice model reads each sequence as an example with one choice (a row with N
    choices costs N of these sequences: latency and FLOPs are per scored sequence)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000 if vocab_size > 2000 else 1, vocab_size, (batch_size, seq_len), generator=g)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": torch.zeros_like(ids),
        "pool_index": torch.zeros(batch_size, dtype=torch.long),
        "decoder_input_ids": ids,
        "decoder_attention_mask": torch.ones_like(ids),
        "choice_mask": torch.ones(batch_size, 1, dtype=torch.bool),
        "target_mask": torch.ones_like(ids, dtype=torch.bool),
    }


# -- side by side ---------------------------------------------------------------------------------
def latencies(models: list[nn.Module], vocab_sizes: list[int], settings: MeasureSettings) -> list[dict]:
    """Per model: {"b{batch}_t{threads}": {"latency_ms", "throughput"}}, alternating the models."""

    def prepare(batch_size: int) -> list:
        batches = [dummy_batch(batch_size, settings.seq_len, v) for v in vocab_sizes]
        return [lambda m=m, b=b: m(b) for m, b in zip(models, batches)]

    return alternating_latencies(prepare, settings)


def measure_side_by_side(source, compressed, task, settings: MeasureSettings) -> tuple[dict, dict, dict]:
    """(source numbers, compressed numbers, settings) for two LoadedTaskModels (module docstring)."""

    rows = []
    for loaded in (source, compressed):
        model = loaded.model.eval()
        params, nonzero = parameter_counts(model)
        size, non_embedding = serialized_sizes(loaded.folder)
        row = {
            "params": params,
            "nonzero_params": nonzero,
            "size_bytes": size,
            "non_embedding_size_bytes": non_embedding,
            "flops": flops_per_example(model, dummy_batch(1, settings.seq_len, len(loaded.tokenizer))),
        }
        if settings.score:
            split = task.eval_splits[0].name
            if task.spec.is_generation:  # the metric and the decoding speed of the same decoding
                metrics, row["generation"] = scored_decoding(loaded, task, split)
            else:
                metrics = evaluate(loaded, task, split)
            row["metrics"] = metrics
            row["score"] = metrics.get(task.spec.metric_key(task.spec.main_metric, split))
        rows.append(row)
    if task.spec.is_generation:  # what a generator is used for: decoding, timed per batch of dev sources
        timed = decoding_latencies([source, compressed], task, settings)
    else:
        timed = latencies(
            [source.model, compressed.model], [len(source.tokenizer), len(compressed.tokenizer)], settings
        )
    for row, lat in zip(rows, timed):
        row["latency"] = lat
        first = next(iter(lat.values()), None)
        row["latency_ms"] = first["latency_ms"] if first else None
    described = {
        "device": "cpu",
        "seq_len": settings.seq_len,
        "batch_sizes": settings.batch_sizes,
        "threads": [t or all_cores() for t in settings.threads],
        "warmup": settings.warmup,
        "repeats": settings.repeats,
        "quantized_engine": torch.backends.quantized.engine,
        "latency_of": "generate() on dev sources" if task.spec.is_generation else "forward pass",
        "torch": torch.__version__,
        **cpu_description(),
    }
    return rows[0], rows[1], described

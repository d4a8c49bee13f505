"""Source and compressed model timed side by side: at each thread count and batch size, warm-up
calls, then repeats that alternate the models' order (a drift in the machine's speed falls on both),
the median milliseconds per batch. Forward passes (measure.py) and `generate()` (decoding_speed.py)
share this loop; they differ only in what one timed call is."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch


class TimingSettings(Protocol):
    threads: list[int]
    batch_sizes: list[int]
    warmup: int
    repeats: int


def all_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@torch.no_grad()
def alternating_latencies(
    prepare: Callable[[int], Sequence[Callable[[], Any]]],
    settings: TimingSettings,
    tokens_of: Callable[[int, Any], int] | None = None,
) -> list[dict]:
    """Per model: {"b{batch}_t{threads}": {latency_ms, throughput[, tokens_per_s], threads, batch_size}}.

    `prepare(batch_size)` gives one call per model, each running that model once on its batch;
    `tokens_of(model index, what its call returned)` (outside the timed region) counts the tokens
    it generated, for tokens_per_s."""
    out: list[dict] = []
    previous = torch.get_num_threads()
    try:
        for threads in settings.threads:
            n = threads or all_cores()
            torch.set_num_threads(n)
            for bs in settings.batch_sizes:
                calls = prepare(bs)
                out = out or [{} for _ in calls]
                for call in calls:
                    for _ in range(settings.warmup):
                        call()
                times: list[list[float]] = [[] for _ in calls]
                tokens = [0] * len(calls)
                for r in range(settings.repeats):
                    order = range(len(calls)) if r % 2 == 0 else reversed(range(len(calls)))
                    for i in order:
                        start = time.perf_counter()
                        result = calls[i]()
                        times[i].append((time.perf_counter() - start) * 1000.0)
                        if tokens_of is not None:
                            tokens[i] = tokens_of(i, result)
                for i, t in enumerate(times):
                    med = statistics.median(t)
                    point = {"latency_ms": round(med, 4), "throughput": round(bs / (med / 1000.0), 3)}
                    if tokens_of is not None:
                        point["tokens_per_s"] = round(tokens[i] / (med / 1000.0), 3)
                    out[i][f"b{bs}_t{n}"] = {**point, "threads": n, "batch_size": bs}
    finally:
        torch.set_num_threads(previous)
    return out

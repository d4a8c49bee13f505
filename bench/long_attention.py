"""Long-sequence attention cost: time and peak memory of one forward + backward of one attention
layer (ptmlab's `MultiHeadAttention` with each `model.backbone.attention` pattern) against the
sequence length, full attention and every pattern side by side in one run, and the growth
time(longest) ÷ time(shortest) per pattern (issue 45's goal at 512 → 4,096: ≤ 10 for the sparse
patterns, against ~(8)² = 64 for full attention's T² scores).

Each layer is the first layer of a one-layer `TransformerEncoder` built with the pattern's keys (the
model's own builder), fed random states B×T×H (no padding, dropout off); its weights are the same
for every pattern (one seed). Each (pattern, length) is measured in a forked child process (CPU) so
that memory freed by one measurement never hides the next one's peak:

  time      median of `--repeats` timed forward + backward passes after one warm-up; CPU: the
            process's CPU time (time.process_time: the machine may be shared, and wall time then
            measures the neighbours), CUDA: wall time after a synchronize
  memory    CPU: peak resident memory of the child above its resident memory at fork (ru_maxrss,
            getrusage; tensors live in malloc/mmap memory, which tracemalloc does not see);
            CUDA: torch.cuda.max_memory_allocated above the memory allocated before the pass

    .venv/bin/python bench/long_attention.py [--lengths 512 1024 2048 4096] [--repeats 3]
        [--patterns full sliding_window longformer bigbird linformer] [--hidden-size 256]
        [--heads 4] [--batch-size 1] [--window 128] [--block-size 64] [--random-blocks 3]
        [--projected-length 256] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "platform"))

import torch

from lightning_modules.models.transformer import TransformerEncoder

PATTERNS = ("full", "sliding_window", "longformer", "bigbird", "linformer")
GOAL = 10.0


def attention_layer(pattern: str, args: argparse.Namespace, max_length: int) -> torch.nn.Module:
    torch.manual_seed(0)
    encoder = TransformerEncoder(
        vocab_size=8,
        hidden_size=args.hidden_size,
        num_layers=1,
        num_heads=args.heads,
        intermediate_size=args.hidden_size,
        max_position_embeddings=max_length,
        dropout=0.0,
        attention_dropout=0.0,
        attention=pattern,
        attention_window=args.window,
        global_tokens=[0],
        block_size=args.block_size,
        num_random_blocks=args.random_blocks,
        projected_length=args.projected_length,
    )
    return encoder.stack.layers[0].attention.to(args.device)


def resident_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def measure(pattern: str, length: int, args: argparse.Namespace) -> tuple[float, float]:
    """(median seconds, peak MiB) of one forward + backward at `length`."""
    layer = attention_layer(pattern, args, max(args.lengths))
    states = torch.randn(args.batch_size, length, args.hidden_size, device=args.device, requires_grad=True)
    cuda = args.device.startswith("cuda")
    clock = time.perf_counter if cuda else time.process_time

    def step() -> None:
        out, _ = layer(states)
        out.sum().backward()
        if cuda:
            torch.cuda.synchronize()

    start_kib = resident_kib()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    step()  # warm-up (and BigBird's block table, drawn once per length)
    times = []
    for _ in range(args.repeats):
        layer.zero_grad(set_to_none=True)
        states.grad = None
        began = clock()
        step()
        times.append(clock() - began)
    if cuda:
        peak_mib = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        peak_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start_kib) / 1024
    return statistics.median(times), peak_mib


def _child(pattern: str, length: int, args: argparse.Namespace, pipe) -> None:
    pipe.send(measure(pattern, length, args))
    pipe.close()


def measure_apart(pattern: str, length: int, args: argparse.Namespace) -> tuple[float, float]:
    if args.device.startswith("cuda"):
        return measure(pattern, length, args)
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(pattern, length, args, send))
    child.start()
    result = receive.recv()
    child.join()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", nargs="+", type=int, default=[512, 1024, 2048, 4096])
    parser.add_argument("--patterns", nargs="+", default=list(PATTERNS), choices=PATTERNS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--window", type=int, default=128, help="one-sided: |i - j| <= window")
    parser.add_argument("--block-size", type=int, default=64)
    parser.add_argument("--random-blocks", type=int, default=3)
    parser.add_argument("--projected-length", type=int, default=256)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    args.lengths = sorted(args.lengths)

    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else platform.processor() or "cpu"
    print(
        f"# one attention layer, forward + backward: hidden {args.hidden_size}, {args.heads} heads, batch "
        f"{args.batch_size}, fp32; window {args.window} (one-sided), global tokens [0], BigBird block "
        f"{args.block_size} + {args.random_blocks} random blocks, Linformer k={args.projected_length}; median of "
        f"{args.repeats} after a warm-up; torch {torch.__version__} on {args.device} ({device_name}), "
        f"{torch.get_num_threads()} threads; time: "
        + ("wall" if args.device.startswith("cuda") else "process CPU time")
        + "; memory: "
        + ("torch.cuda.max_memory_allocated" if args.device.startswith("cuda") else "peak RSS of a forked child")
    )
    results: dict[tuple[str, int], tuple[float, float]] = {}
    for length in args.lengths:
        for pattern in args.patterns:
            results[pattern, length] = measure_apart(pattern, length, args)
            seconds, mib = results[pattern, length]
            print(f"  measured {pattern:<15} T={length:<5} {seconds * 1000:10.1f} ms {mib:9.1f} MiB", flush=True)

    header = " | ".join(f"T={t} ms / MiB" for t in args.lengths)
    first, last = args.lengths[0], args.lengths[-1]
    print(f"\n| attention | {header} | time({last}) ÷ time({first}) |")
    print("|---|" + "---|" * (len(args.lengths) + 1))
    for pattern in args.patterns:
        cells = " | ".join(f"{results[pattern, t][0] * 1000:.1f} / {results[pattern, t][1]:.0f}" for t in args.lengths)
        growth = results[pattern, last][0] / results[pattern, first][0]
        print(f"| {pattern} | {cells} | {growth:.1f} |")
    growth_of = {p: results[p, last][0] / results[p, first][0] for p in args.patterns}
    sparse = [p for p in args.patterns if p != "full"]
    if sparse and last == 8 * first:
        worst = max(growth_of[p] for p in sparse)
        print(f"\nworst sparse growth {worst:.1f} (goal ≤ {GOAL:g}, full: {growth_of.get('full', float('nan')):.1f}): "
              + ("met" if worst <= GOAL else "NOT met"))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

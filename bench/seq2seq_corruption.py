"""What the encoder–decoder objectives' corruption costs inside a pre-training step: T5's span
corruption, BART's denoising and MASS corrupt each row on the host, inside the step. For each
experiment preset, the same batches (moved to the device first, as Lightning does) go through
(a) the objective's own step: corrupt + forward + backward + optimizer, and
(b) the same step on the same batches corrupted beforehand (the model's share alone).
Blocks alternate a/b so machine noise hits both; prints the median step time of each, the
corruption alone, and the median of the per-pair ratios a ÷ b (1.0: the corruption is free).

    .venv/bin/python bench/seq2seq_corruption.py [--presets t5 bart mass] [--device cpu|gpu]
        [--steps 30] [--pairs 3] [--corpus DIR_OF_TXT] [--json out.json]

Without --corpus the presets' Gutenberg corpus under PTMLAB_DATA_DIR is read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lightning_modules.data.pretrain_datamodule import PretrainDataModule
from lightning_modules.stages.pretrain import build_pretrain_module
from ptmlab.config import compose_config


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(preset: str, device: torch.device, args, cache_dir: str) -> dict:
    overrides = [
        f"experiment={preset}",
        f"paths.cache_dir={cache_dir}",
        f"data.block_size={args.block_size}",
        f"data.batch_size={args.batch_size}",
    ]
    if args.corpus:
        overrides += ["data=text_files", f"data.corpus.path={args.corpus}"]
    cfg = compose_config(overrides)
    datamodule = PretrainDataModule(cfg.data, cfg.tokenizer, cfg.paths.cache_dir, seed=int(cfg.seed))
    datamodule.setup()
    torch.manual_seed(int(cfg.seed))
    module = build_pretrain_module(cfg, datamodule).to(device)
    (objective,) = module.objectives.values()
    loader = iter(datamodule.train_dataloader())
    batches = [{k: v.to(device) for k, v in next(loader).items() if torch.is_tensor(v)} for _ in range(args.steps)]
    corrupted = [objective.corrupt(batch) for batch in batches]
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4)

    def one_step(batch: dict, fixed: tuple | None) -> float:
        if fixed is not None:
            objective.corrupt = lambda _batch: fixed  # the instance attribute shadows the method
        synchronize(device)
        start = time.perf_counter()
        out = objective(batch, module.backbone)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize(device)
        elapsed = time.perf_counter() - start
        if fixed is not None:
            del objective.corrupt
        return elapsed

    def corrupt_only(batch: dict) -> float:
        synchronize(device)
        start = time.perf_counter()
        objective.corrupt(batch)
        synchronize(device)
        return time.perf_counter() - start

    for batch, fixed in zip(batches[:3], corrupted[:3]):  # warm-up: allocator, kernels, autotuning
        one_step(batch, None)
        one_step(batch, fixed)
    own, precorrupted, ratios = [], [], []
    for _ in range(args.pairs):
        a = statistics.median(one_step(batch, None) for batch in batches)
        b = statistics.median(one_step(batch, fixed) for batch, fixed in zip(batches, corrupted))
        own.append(a)
        precorrupted.append(b)
        ratios.append(a / b)
    corruption = statistics.median(corrupt_only(batch) for batch in batches)
    return {
        "preset": preset,
        "objective": str(cfg.objective.name),
        "model": str(cfg.model.name),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "own_step_ms": 1000 * statistics.median(own),
        "precorrupted_step_ms": 1000 * statistics.median(precorrupted),
        "corruption_ms": 1000 * corruption,
        "ratio": statistics.median(ratios),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["t5", "bart", "mass"])
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--steps", type=int, default=30, help="batches per block")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--corpus", type=Path, default=None, help="a folder of .txt files (default: Gutenberg)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("PTMLAB_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    if args.device == "gpu" and not torch.cuda.is_available():
        sys.exit("--device gpu: no CUDA device here")
    device = torch.device("cuda:0" if args.device == "gpu" else "cpu")
    with tempfile.TemporaryDirectory() as cache_dir:
        rows = [measure(preset, device, args, cache_dir) for preset in args.presets]
    print(
        f"\nbatch {args.batch_size} × block {args.block_size}, {args.steps} steps a block, {args.pairs} pairs, "
        f"device {rows[0]['device']}, CPU threads {torch.get_num_threads()}"
    )
    header = f"{'preset':<7}{'objective':<17}{'own step ms':>12}{'pre-corrupted ms':>18}{'corrupt ms':>12}{'ratio':>8}"
    print(header + "\n" + "-" * len(header))
    for r in rows:
        print(
            f"{r['preset']:<7}{r['objective']:<17}{r['own_step_ms']:>12.2f}{r['precorrupted_step_ms']:>18.2f}"
            f"{r['corruption_ms']:>12.2f}{r['ratio']:>8.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

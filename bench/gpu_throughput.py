"""Pre-training throughput and MFU on one GPU, eager vs `torch.compile`, through ptmlab's own
pre-training module, Lightning Trainer and throughput monitor (the numbers a run logs):

  BERT-base MLM at sequence 128 and 512, GPT-2 small CLM at 1024; bf16-mixed, AdamW (fused).

Batches are random token ids (throughput does not depend on the text), full length, no padding.
Each case trains `--steps` steps; the first `--warmup` (allocator, cuDNN/cuBLAS autotuning,
compilation) are not timed. Prints a table and writes JSON (`--json`) and Markdown (`--markdown`).

Two MFU columns: `mfu` is what a ptmlab run logs (the objective's Kaplan et al. estimate,
6·N_non-embedding + 6·L·T·H per token); `mfu_palm` counts every parameter (the tied output
projection included) and attention as 12·L·T·H (Chowdhery et al. 2022, Megatron-LM), the
convention of published MFU figures.

    .venv/bin/python bench/gpu_throughput.py [--steps 60] [--warmup 15] [--json out.json] [--markdown out.md]

Without a CUDA device it says so and exits 0 (skipped) — unless `--cpu-smoke`, which runs the same
code on tiny models for a few steps on the CPU to check the script itself (its figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "platform"))

import lightning.pytorch as pl
import torch
from hydra.utils import instantiate
from torch.utils.data import DataLoader, Dataset

from lightning_modules.data.pretrain_datamodule import PretrainDataModule
from lightning_modules.objectives.parts import objective_parts
from lightning_modules.runtime.speed import SpeedSwitches
from lightning_modules.runtime.throughput import ThroughputMonitor, Totals, device_name, peak_flops_per_device
from lightning_modules.stages.pretrain import build_backbone
from lightning_modules.stages.pretrain_module import PretrainModule, count_parameters
from ptmlab.config import compose_config

# (name, model, objective, sequence length, batch size, vocabulary)
GPU_CASES = [
    ("BERT-base MLM", "bert_base", "mlm", 128, 128, 30522),
    ("BERT-base MLM", "bert_base", "mlm", 512, 32, 30522),
    ("GPT-2 small CLM", "gpt2_small", "clm", 1024, 16, 50257),
]
CPU_SMOKE_CASES = [
    ("BERT-tiny MLM (CPU smoke)", "bert_tiny", "mlm", 32, 4, 1000),
    ("GPT-tiny CLM (CPU smoke)", "gpt_tiny", "clm", 32, 4, 1000),
]


class RandomBlocks(Dataset):
    def __init__(self, n: int, seq_len: int, low: int, high: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(low, high, (n, seq_len), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.ids[i]


def collate(items: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    ids = torch.stack(items)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


class StartTimingAfter(pl.Callback):
    """Drops the monitor's figures of the first `warmup` steps (compilation, autotuning)."""

    def __init__(self, monitor: ThroughputMonitor, warmup: int):
        self.monitor, self.warmup = monitor, warmup

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.warmup:
            self.monitor._close_window(trainer, log_metrics=False)
            self.monitor.totals = Totals()


def tokenizer_for(model: str, objective: str, cache_dir: str):
    """A small tokenizer trained on the offline corpus: the objectives need its special ids; the
    model's vocabulary is set to the real model's size regardless."""
    cfg = compose_config(
        [
            f"model={model}",
            f"objective={objective}",
            "data=offline",
            "data.corpus.max_documents=2000",
            "tokenizer.vocab_size=1000",
            f"paths.cache_dir={cache_dir}",
        ]
    )
    kind = str(cfg.tokenizer.kind)
    dm = PretrainDataModule(cfg.data, cfg.tokenizer, cfg.paths.cache_dir, seed=0)
    return cfg, dm.tokenizer, kind


def run_case(
    name: str,
    model: str,
    objective: str,
    seq_len: int,
    batch_size: int,
    vocab: int,
    *,
    compiled: bool,
    steps: int,
    warmup: int,
    accelerator: str,
    precision: str,
    cache_dir: str,
) -> dict:
    cfg, tokenizer, _ = tokenizer_for(model, objective, cache_dir)
    pl.seed_everything(0, verbose=False)
    backbone = build_backbone(cfg.model, vocab)
    objectives, weights = {}, {}
    for part, (weight, module_cfg) in objective_parts(cfg.objective).items():
        objectives[part] = instantiate(module_cfg, backbone=backbone, tokenizer=tokenizer)
        weights[part] = weight
    optimizer_cfg = compose_config([f"optimizer.fused={'true' if accelerator == 'gpu' else 'null'}"]).optimizer
    module = PretrainModule(backbone, objectives, weights, optimizer_cfg, None, total_steps=steps, seq_len=seq_len)
    device = device_name(accelerator)
    monitor = ThroughputMonitor(module.training_flops_per_token, peak_flops_per_device(device, precision, None), device)
    # The CPU smoke run checks the Dynamo path with its cheap `eager` backend (inductor's C++
    # compilation of BERT on a shared CPU takes minutes and says nothing about GPUs).
    switches = SpeedSwitches(compile=compiled, compile_backend="inductor" if accelerator == "gpu" else "eager")
    data = RandomBlocks(batch_size * (steps + 1), seq_len, len(tokenizer.all_special_ids) + 1, len(tokenizer))
    loader = DataLoader(
        data,
        batch_size=batch_size,
        shuffle=False,
        collate_fn=collate,
        num_workers=2,
        pin_memory=accelerator == "gpu",
        drop_last=True,
        persistent_workers=True,
    )
    trainer = pl.Trainer(
        accelerator=accelerator,
        devices=1,
        precision=precision,
        max_steps=steps,
        logger=False,
        callbacks=[switches, monitor, StartTimingAfter(monitor, warmup)],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        log_every_n_steps=10,
        gradient_clip_val=None,
        num_sanity_val_steps=0,
    )
    started = time.perf_counter()
    trainer.fit(module, train_dataloaders=loader)
    figures = monitor.summary()
    n_all = count_parameters(module)  # tied output projection counted once, as it runs once
    palm_per_token = 6.0 * n_all + 12.0 * backbone.num_layers * seq_len * backbone.hidden_size
    peak = figures["peak_flops"]
    tokens_per_s = figures["tokens_per_s"]
    return {
        "case": name,
        "model": model,
        "objective": objective,
        "seq_len": seq_len,
        "batch_size": batch_size,
        "vocab": vocab,
        "mode": "compiled" if compiled else "eager",
        "compile_status": switches.compile_status,
        "precision": precision,
        "device": device,
        "steps": steps,
        "timed_steps": figures["timed_steps"],
        "tokens_per_s": tokens_per_s,
        "samples_per_s": figures["samples_per_s"],
        "mfu": figures["mfu"],
        "mfu_palm": (tokens_per_s * palm_per_token / peak) if (peak and tokens_per_s) else None,
        "data_wait_fraction": figures["data_wait_fraction"],
        "peak_flops": peak,
        "flops_per_token": module.flops_per_token,
        "palm_flops_per_token": palm_per_token,
        "max_memory_gib": (torch.cuda.max_memory_allocated() / 2**30) if accelerator == "gpu" else None,
        "wall_s": round(time.perf_counter() - started, 1),
    }


def markdown(rows: list[dict], header: str) -> str:
    def pct(v):
        return "–" if v is None else f"{100 * v:.1f} %"

    lines = [
        header,
        "",
        "| case | seq | batch | mode | tokens/s | samples/s | MFU (ptmlab) | MFU (PaLM) | data wait | memory GiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(
                f"| {r['case']} | {r['seq_len']} | {r['batch_size']} | {r['mode']} | failed: {r['error'][:80]} | | | | | |"
            )
            continue
        mem = "–" if r["max_memory_gib"] is None else f"{r['max_memory_gib']:.1f}"
        lines.append(
            f"| {r['case']} | {r['seq_len']} | {r['batch_size']} | {r['mode']} | {r['tokens_per_s']:,.0f} | "
            f"{r['samples_per_s']:,.1f} | {pct(r['mfu'])} | {pct(r['mfu_palm'])} | "
            f"{pct(r['data_wait_fraction'])} | {mem} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny models on the CPU: checks the script, not speed")
    parser.add_argument("--no-compile", action="store_true", help="eager only")
    args = parser.parse_args()
    gpu = torch.cuda.is_available()
    if not gpu and not args.cpu_smoke:
        print("gpu_throughput: skipped (no CUDA device on this machine; --cpu-smoke checks the script on tiny models)")
        if args.json:
            args.json.write_text(json.dumps({"skipped": "no CUDA device", "rows": []}, indent=2))
        return 0
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    cases = GPU_CASES if gpu else CPU_SMOKE_CASES
    steps, warmup = (args.steps, args.warmup) if gpu else (min(args.steps, 8), min(args.warmup, 3))
    accelerator, precision = ("gpu", "bf16-mixed") if gpu else ("cpu", "bf16-mixed")
    cache_dir = tempfile.mkdtemp(prefix="ptmlab-gpu-bench-")
    rows = []
    for case in cases:
        for compiled in [False] if args.no_compile else [False, True]:
            try:
                row = run_case(
                    *case,
                    compiled=compiled,
                    steps=steps,
                    warmup=warmup,
                    accelerator=accelerator,
                    precision=precision,
                    cache_dir=cache_dir,
                )
            except Exception as exc:
                row = {
                    "case": case[0],
                    "seq_len": case[3],
                    "batch_size": case[4],
                    "mode": "compiled" if compiled else "eager",
                    "error": f"{type(exc).__name__}: {exc}",
                }
            rows.append(row)
            print(json.dumps(row), flush=True)
            if gpu:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
    device = rows[0].get("device", "?") if rows else "?"
    header = f"### Pre-training throughput, {precision}, {device}, torch {torch.__version__}" + (
        "" if gpu else " — CPU smoke run: checks the script, the figures mean nothing"
    )
    table = markdown(rows, header)
    print("\n" + table)
    if args.json:
        args.json.write_text(json.dumps({"device": device, "gpu": gpu, "rows": rows}, indent=2))
    if args.markdown:
        args.markdown.write_text(table)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

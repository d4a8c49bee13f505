"""Training-step overhead of ptmlab's pre-training LightningModule (run through a Lightning
Trainer as `ptmlab.run` builds it: MLflow logging, the throughput monitor and the speed-switch
callback included) ÷ a plain PyTorch loop, on the same tiny MLM model, data, optimizer and
schedule. Blocks alternate A/B so machine noise hits both; prints the median step time of each and
the median of the per-pair ratios (goal ≤ 1.02).

    .venv/bin/python bench/overhead.py [--steps 60] [--pairs 3] [--device cpu|gpu] [--json out.json]

`--device gpu`: trainer=gpu (bf16-mixed) against a plain loop under the same bf16 autocast, with
the batches moved to the GPU the same way in both arms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import lightning.pytorch as pl
import torch
from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lightning_modules.data.pretrain_datamodule import PretrainDataModule
from lightning_modules.runtime.speed import SpeedSwitches, split_trainer_config, unscale_before_clipping
from lightning_modules.runtime.step_timer import StepGaps, StepTimer
from lightning_modules.runtime.throughput import ThroughputMonitor, device_name, peak_flops_per_device
from lightning_modules.stages.pretrain import build_pretrain_module
from ptmlab.config import compose_config

WARMUP_STEPS = 5  # first steps include allocator/JIT warm-up in both arms


def ptmlab_arm(cfg, datamodule, steps: int, tracking_uri: str) -> list[float]:
    from lightning.pytorch.loggers import MLFlowLogger

    pl.seed_everything(0, verbose=False)
    module = build_pretrain_module(cfg, datamodule)
    timer = StepTimer()
    trainer_cfg, speed = split_trainer_config(OmegaConf.to_container(cfg.trainer, resolve=True))
    trainer_cfg.pop("_target_")
    trainer_cfg.update(
        max_steps=steps,
        enable_progress_bar=False,
        val_check_interval=None,
        limit_val_batches=0,
        enable_checkpointing=False,
    )
    # The callbacks StageRun.build_trainer adds to every run (checkpointing aside).
    peak = speed.pop("peak_flops", None)
    device = device_name(str(trainer_cfg["accelerator"]))
    monitor = ThroughputMonitor(
        module.training_flops_per_token, peak_flops_per_device(device, trainer_cfg.get("precision"), peak), device
    )
    trainer = pl.Trainer(
        **trainer_cfg,
        callbacks=[timer, SpeedSwitches(**speed), monitor],
        logger=MLFlowLogger(experiment_name="bench-overhead", tracking_uri=tracking_uri),
    )
    unscale_before_clipping(trainer)  # as StageRun.build_trainer: fused AdamW is clipped unscaled
    trainer.fit(module, train_dataloaders=datamodule.train_dataloader())
    return timer.times[WARMUP_STEPS:]


def plain_arm(cfg, datamodule, steps: int) -> list[float]:
    pl.seed_everything(0, verbose=False)
    module = build_pretrain_module(cfg, datamodule)
    gpu = str(cfg.trainer.accelerator) in ("gpu", "cuda")
    if gpu:
        module.cuda()
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=gpu and str(cfg.trainer.precision) == "bf16-mixed")
    opt_cfg = module.configure_optimizers()
    optimizer, scheduler = opt_cfg["optimizer"], opt_cfg["lr_scheduler"]["scheduler"]
    module.train()
    gaps, done = StepGaps(), 0
    clip = float(cfg.trainer.gradient_clip_val or 0)
    while done < steps:
        for batch in datamodule.train_dataloader():
            if gpu:
                batch = {k: v.cuda(non_blocking=True) for k, v in batch.items()}
            with autocast:
                loss, _ = module._compute(batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
            optimizer.step()
            scheduler.step()
            float(loss)  # the Lightning arm logs the loss, which syncs it too
            gaps.lap()
            done += 1
            if done >= steps:
                break
    return gaps.times[WARMUP_STEPS:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--data", default="offline")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.device == "gpu" and not torch.cuda.is_available():
        print("overhead --device gpu: skipped (no CUDA device)")
        return
    cfg = compose_config(
        ["model=bert_tiny", "objective=mlm", f"data={args.data}", "tokenizer=wordpiece", f"trainer={args.device}"]
    )
    tmp = Path(tempfile.mkdtemp(prefix="ptmlab-bench-"))
    datamodule = PretrainDataModule(cfg.data, cfg.tokenizer, cfg.paths.cache_dir, seed=0)
    datamodule.setup()
    tracking_uri = f"sqlite:///{tmp / 'mlflow.db'}"
    ratios, a_medians, b_medians = [], [], []
    for pair in range(args.pairs):
        a = statistics.median(ptmlab_arm(cfg, datamodule, args.steps, tracking_uri))
        b = statistics.median(plain_arm(cfg, datamodule, args.steps))
        a_medians.append(a)
        b_medians.append(b)
        ratios.append(a / b)
        print(f"pair {pair}: ptmlab {a * 1e3:.1f} ms/step, plain {b * 1e3:.1f} ms/step, ratio {a / b:.3f}", flush=True)
    print(
        f"\nbert_tiny MLM, batch {cfg.data.batch_size}×{cfg.data.block_size}, {args.steps} steps × {args.pairs} pairs, "
        f"torch threads {torch.get_num_threads()}"
    )
    print(
        f"median step time: ptmlab {statistics.median(a_medians) * 1e3:.1f} ms, plain loop {statistics.median(b_medians) * 1e3:.1f} ms"
    )
    print(
        f"overhead ratio (ptmlab / plain PyTorch loop), median of pairs: {statistics.median(ratios):.3f}  (goal <= 1.02)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "bench": "pretrain_overhead",
                    "device": device_name(args.device),
                    "model": "bert_tiny",
                    "objective": "mlm",
                    "steps": args.steps,
                    "pairs": args.pairs,
                    "ptmlab_ms": statistics.median(a_medians) * 1e3,
                    "plain_ms": statistics.median(b_medians) * 1e3,
                    "ratio_vs_plain": statistics.median(ratios),
                    "ratios": ratios,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()

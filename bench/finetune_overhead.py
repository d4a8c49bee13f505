"""Fine-tuning step time through ptmlab ÷ a plain PyTorch loop (goal ≤ 1.02) and ÷ Hugging Face
`Trainer` (goal ≤ 1.02), on the packaged MiniLM (`model=minilm`, offline) and the first rows of SST-2 train
(batch 32, max length 64, dynamic padding, AdamW 5e-5, linear warm-up, clip 1.0).

  A  ptmlab: TaskModel + FinetuneModule from `build_finetune` (the builder `run_finetune`
     itself uses), trained by a Lightning Trainer from
     cfg.trainer as `StageRun.build_trainer` makes it (its throughput monitor and speed-switch
     callback included), logging to MLflow in a temp SQLite store (checkpointing and progress bar
     off); step time = gap between `on_train_batch_end` calls.
  B  plain: the same TaskModel, the same batches of the same `train_dataloader()`, the
     optimizer/schedule of `configure_optimizers()`, a hand-written loop.
  C  Hugging Face: `AutoModelForSequenceClassification` + `Trainer` on the same tokenised
     examples (`DataCollatorWithPadding`), fed in the ptmlab arm's batch order (a sequential
     sampler over the examples laid out as ptmlab's shuffle drew them), so every arm pads and
     computes the same batches: Trainer's own random sampler drew batches that pad to 2.4 % fewer
     tokens on this slice (mean 40.2 against 41.16 sub-words), which read as ptmlab overhead;
     step time = gap between `on_step_end` calls.

Rounds alternate A/B/C (order rotated each round) so machine noise hits every arm; the first
steps of each block (allocator warm-up) are dropped. Prints the median step times and the median
of the per-round ratios.

    PTMLAB_DATA_DIR=/work/shared/data .venv/bin/python bench/finetune_overhead.py [--steps 30] [--rounds 3]
        [--device cpu|gpu] [--json out.json] [--override KEY=VALUE ...]

`--device gpu`: trainer=gpu (bf16-mixed); the plain loop under the same bf16 autocast, HF Trainer
with bf16=True. `--override` adds Hydra overrides to the ptmlab and plain arms (e.g.
`model.backbone.attn_implementation=eager` to measure what SDPA brought).

The Trainer arm needs `accelerate` (transformers' own requirement for `Trainer`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
BENCH_HOME = Path(tempfile.mkdtemp(prefix="ptmlab-bench-finetune-"))
os.environ["PTMLAB_HOME"] = str(BENCH_HOME)  # MLflow store + artifacts of the ptmlab arm: temporary
os.environ.pop("MLFLOW_TRACKING_URI", None)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "platform"))

import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lightning_modules.runtime.speed import SpeedSwitches, split_trainer_config, unscale_before_clipping
from lightning_modules.runtime.stage_run import StageRun
from lightning_modules.runtime.step_timer import StepGaps, StepTimer
from lightning_modules.runtime.throughput import ThroughputMonitor, device_name, peak_flops_per_device
from lightning_modules.stages.finetune import FinetuneParts, build_finetune
from ptmlab.config import compose_config

WARMUP_STEPS = 5  # first gaps of each block include allocator warm-up in every arm
SEED = 0
WARMUP_RATIO = 0.1


def build_ptmlab_parts(cfg, steps: int) -> FinetuneParts:
    """The parts `run_finetune` trains, from its own builder (seeded with cfg.seed = SEED)."""
    parts = build_finetune(cfg)
    assert parts.total_steps == steps, (parts.total_steps, steps)
    parts.model.train()  # Hugging Face checkpoints load in eval mode
    return parts


def ptmlab_arm(cfg, steps: int, block: int) -> list[float]:
    cfg = cfg.copy()
    OmegaConf.set_struct(cfg, False)
    cfg.run_dir = str(BENCH_HOME / "runs" / f"ptmlab-{block}")
    parts = build_ptmlab_parts(cfg, steps)
    module, datamodule = parts.module, parts.datamodule
    timer = StepTimer()
    with StageRun(cfg) as run:
        # StageRun.build_trainer's Trainer minus its ModelCheckpoint (checkpointing off while timing).
        trainer_cfg, speed = split_trainer_config(OmegaConf.to_container(cfg.trainer, resolve=True))
        trainer_cfg.update(
            max_steps=steps,
            max_epochs=int(cfg.stage.epochs),
            enable_progress_bar=False,
            enable_checkpointing=False,
            val_check_interval=1.0,
            check_val_every_n_epoch=1,
            limit_val_batches=0,
        )
        peak = speed.pop("peak_flops", None)
        device = device_name(str(trainer_cfg["accelerator"]))
        monitor = ThroughputMonitor(
            module.training_flops_per_token, peak_flops_per_device(device, trainer_cfg.get("precision"), peak), device
        )
        trainer = instantiate(
            trainer_cfg,
            logger=run.logger,
            callbacks=[timer, SpeedSwitches(**speed), monitor],
            default_root_dir=str(run.run_dir),
        )
        unscale_before_clipping(trainer)  # as StageRun.build_trainer: fused AdamW is clipped unscaled
        trainer.fit(module, datamodule=datamodule)
        assert trainer.global_step == steps, trainer.global_step
    return timer.times[WARMUP_STEPS:]


def plain_arm(cfg, steps: int) -> list[float]:
    parts = build_ptmlab_parts(cfg, steps)
    model, module, datamodule = parts.model, parts.module, parts.datamodule
    configured = module.configure_optimizers()
    optimizer, scheduler = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    clip = float(cfg.trainer.get("gradient_clip_val") or 0.0)
    gpu = str(cfg.trainer.accelerator) in ("gpu", "cuda")
    if gpu:
        model.cuda()
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=gpu and str(cfg.trainer.precision) == "bf16-mixed")
    params = [p for p in model.parameters() if p.requires_grad]
    gaps, done = StepGaps(), 0
    while done < steps:
        for batch in datamodule.train_dataloader():
            if gpu:
                batch = {k: v.cuda(non_blocking=True) for k, v in batch.items()}
            with autocast:
                logits = model(batch)
            loss = F.cross_entropy(logits.float(), batch["labels"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(params, clip)
            optimizer.step()
            scheduler.step()
            float(loss.detach())  # the Lightning arm logs the loss, which syncs it too
            gaps.lap()
            done += 1
            if done >= steps:
                break
    return gaps.times[WARMUP_STEPS:]


class EncodedExamples(torch.utils.data.Dataset):
    """The ptmlab arm's tokenised train examples as Hugging Face-style dicts."""

    def __init__(self, encoded: list[dict]):
        self.items = [
            {
                "input_ids": x["input_ids"],
                "token_type_ids": x["token_type_ids"],
                "attention_mask": [1] * len(x["input_ids"]),
                "labels": x["label"],
            }
            for x in encoded
        ]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        return self.items[i]


def hf_arm(
    cfg, dataset: EncodedExamples, tokenizer, model_path: str, steps: int, block: int, gpu: bool = False
) -> list[float]:
    from transformers import (
        AutoModelForSequenceClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    class HFStepTimer(StepGaps, TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            self.lap()

    torch.manual_seed(SEED)
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2)
    opt = cfg.optimizer
    args = TrainingArguments(
        output_dir=str(BENCH_HOME / "hf" / str(block)),
        per_device_train_batch_size=int(cfg.stage.batch_size),
        max_steps=steps,
        learning_rate=float(cfg.stage.lr),
        weight_decay=float(opt.weight_decay),
        adam_beta1=float(opt.betas[0]),
        adam_beta2=float(opt.betas[1]),
        adam_epsilon=float(opt.eps),
        lr_scheduler_type="linear",
        warmup_steps=int(round(WARMUP_RATIO * steps)),
        max_grad_norm=float(cfg.trainer.get("gradient_clip_val") or 0.0),
        report_to=[],
        save_strategy="no",
        eval_strategy="no",
        logging_steps=10**9,
        use_cpu=not gpu,
        bf16=gpu,
        disable_tqdm=True,
        seed=SEED,
        dataloader_num_workers=0,
        train_sampling_strategy="sequential",
    )
    timer = HFStepTimer()
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=dataset,
        data_collator=DataCollatorWithPadding(tokenizer),
        callbacks=[timer],
    )
    trainer.train()
    assert trainer.state.global_step == steps, trainer.state.global_step
    return timer.times[WARMUP_STEPS:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30, help="optimizer steps per block")
    parser.add_argument("--rounds", type=int, default=3, help="A/B/C rounds")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--override", action="append", default=[], help="extra Hydra override (ptmlab and plain arms)")
    args = parser.parse_args()
    if args.device == "gpu" and not torch.cuda.is_available():
        print("finetune_overhead --device gpu: skipped (no CUDA device)")
        return
    try:
        import accelerate  # noqa: F401 - transformers.Trainer needs it
    except ImportError:
        parser.error("the Hugging Face Trainer arm needs the 'accelerate' package (pip install accelerate)")
    if args.steps <= WARMUP_STEPS + 1:
        parser.error(f"--steps must exceed {WARMUP_STEPS + 1} (the first {WARMUP_STEPS} gaps are dropped)")
    batch_size, rows = 32, args.steps * 32  # one epoch holds every step: no epoch-end validation
    cfg = compose_config(
        [
            "stage=finetune",
            "model=minilm",
            "task=glue/sst2",
            f"task.max_train_samples={rows}",
            "task.max_length=64",
            "stage.epochs=1",
            f"stage.max_steps={args.steps}",
            f"stage.batch_size={batch_size}",
            "stage.lr=5e-5",
            "stage.pooling=mean",
            "optimizer=adamw",
            "scheduler=linear_warmup",
            f"scheduler.warmup_ratio={WARMUP_RATIO}",
            "adaptation=full",
            "checkpoint_every_n_steps=0",
            f"seed={SEED}",
            f"tracking.uri=sqlite:///{BENCH_HOME / 'mlflow.db'}",
            "tracking.experiment=bench-finetune-overhead",
            f"trainer={args.device}",
            *args.override,
        ]
    )
    parts = build_ptmlab_parts(cfg, args.steps)
    task, tokenizer = parts.task, parts.resolved.tokenizer
    assert math.ceil(len(task.train) / batch_size) >= args.steps, "not enough SST-2 rows for --steps"
    # The examples in the order the ptmlab and plain arms' (seeded) shuffle gives them.
    order = [int(i) for batch in parts.datamodule.train_dataloader() for i in batch["example_index"]]
    encoded = parts.datamodule.encoded(task.data.train_split)
    hf_dataset = EncodedExamples([encoded[i] for i in order])
    from lightning_modules.models.hf import resolve_name_or_path

    model_path = str(resolve_name_or_path(str(cfg.model.name_or_path)))

    arms = {
        "ptmlab": lambda block: ptmlab_arm(cfg, args.steps, block),
        "plain": lambda block: plain_arm(cfg, args.steps),
        "hf": lambda block: hf_arm(cfg, hf_dataset, tokenizer, model_path, args.steps, block, args.device == "gpu"),
    }
    names = list(arms)
    medians: dict[str, list[float]] = {name: [] for name in names}
    vs_plain, vs_hf = [], []
    for rnd in range(args.rounds):
        order = names[rnd % 3 :] + names[: rnd % 3]
        for name in order:
            medians[name].append(statistics.median(arms[name](rnd)))
        a, b, c = (medians[n][-1] for n in names)
        vs_plain.append(a / b)
        vs_hf.append(a / c)
        print(
            f"round {rnd} ({'/'.join(order)}): ptmlab {a * 1e3:.1f} ms/step, plain {b * 1e3:.1f}, "
            f"HF Trainer {c * 1e3:.1f}; ptmlab/plain {a / b:.3f}, ptmlab/HF {a / c:.3f}",
            flush=True,
        )
    print(
        f"\nMiniLM-L6 (model=minilm) full fine-tuning on SST-2, batch {batch_size}, max length 64, "
        f"{args.steps} steps × {args.rounds} rounds (first {WARMUP_STEPS} dropped), "
        f"torch threads {torch.get_num_threads()}"
    )
    print("median step time: " + ", ".join(f"{n} {statistics.median(medians[n]) * 1e3:.1f} ms" for n in names))
    print(f"ptmlab / plain PyTorch loop, median of rounds: {statistics.median(vs_plain):.3f}  (goal <= 1.02)")
    print(f"ptmlab / Hugging Face Trainer, median of rounds: {statistics.median(vs_hf):.3f}  (goal <= 1.02)")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "bench": "finetune_overhead",
                    "device": device_name(args.device),
                    "model": "minilm",
                    "task": "sst2",
                    "steps": args.steps,
                    "rounds": args.rounds,
                    "overrides": args.override,
                    "median_ms": {n: statistics.median(medians[n]) * 1e3 for n in names},
                    "ratio_vs_plain": statistics.median(vs_plain),
                    "ratio_vs_hf": statistics.median(vs_hf),
                    "ratios_vs_plain": vs_plain,
                    "ratios_vs_hf": vs_hf,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()

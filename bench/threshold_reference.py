"""The plain-PyTorch reference behind the suite's MiniLM SST-2 thresholds (tests/e2e/sst2_recipe.py):
what a hand-written training loop reaches with the test's recipe, so a threshold is set from a
measurement at the size the suite runs, not guessed.

For each adaptation mode: the same model `build_finetune` makes (packaged MiniLM-L6 + mean pooling
+ the mode's modules), the same training batches (`train_dataloader()`: the recipe's rows, max
length, batch size, and length grouping when asked), the optimizer and linear warm-up schedule of
`configure_optimizers()`, gradient clipping as cfg.trainer says; one epoch by a plain loop (no
Lightning, no MLflow), then accuracy on the whole SST-2 dev set by a plain loop. Arms run one after
another in one process, each seeded the same.

    PTMLAB_DATA_DIR=/work/shared/data .venv/bin/python bench/threshold_reference.py \
        [--rows 8000] [--max-length 64] [--group-by-length] [--modes full,adapters,lora,bitfit,prompt_tuning]
        [--json out.json]
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
os.environ["PTMLAB_HOME"] = tempfile.mkdtemp(prefix="ptmlab-bench-reference-")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from sst2_recipe import MODES, recipe

from lightning_modules.stages.finetune import build_finetune
from ptmlab.config import compose_config


def plain_run(overrides: list[str]) -> dict:
    cfg = compose_config(["stage=finetune", *overrides, "+run_dir=" + os.environ["PTMLAB_HOME"] + "/run"])
    pl.seed_everything(int(cfg.seed), workers=True, verbose=False)
    parts = build_finetune(cfg)
    model, module, datamodule = parts.model, parts.module, parts.datamodule
    model.train()  # Hugging Face checkpoints load in eval mode
    configured = module.configure_optimizers()
    optimizer, scheduler = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    clip = float(cfg.trainer.get("gradient_clip_val") or 0.0)
    params = [p for p in model.parameters() if p.requires_grad]
    started, steps = time.perf_counter(), 0
    for _ in range(int(cfg.stage.epochs)):
        for batch in datamodule.train_dataloader():
            loss = F.cross_entropy(model(batch).float(), batch["labels"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(params, clip)
            optimizer.step()
            scheduler.step()
            steps += 1
    train_s = time.perf_counter() - started
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in datamodule._loader("dev", False, datamodule.eval_batch_size):
            correct += int((model(batch).argmax(-1) == batch["labels"]).sum())
            total += len(batch["labels"])
    trainable = sum(p.numel() for p in params)
    return {
        "accuracy": correct / total,
        "dev_rows": total,
        "steps": steps,
        "train_s": round(train_s, 1),
        "trainable_share": trainable / sum(p.numel() for p in model.parameters()),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=None, help="training rows (default: the suite's recipe)")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--group-by-length", choices=("true", "false"), default=None)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = {}
    for mode in args.modes.split(","):
        overrides = recipe(
            MODES[mode], rows=args.rows, max_length=args.max_length, group_by_length=args.group_by_length
        )
        results[mode] = {"overrides": overrides, **plain_run(overrides)}
        r = results[mode]
        print(
            f"{mode}: dev accuracy {r['accuracy']:.4f} on {r['dev_rows']} rows after {r['steps']} steps "
            f"({r['train_s']:.0f} s training, {r['trainable_share']:.3%} trainable)",
            flush=True,
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"bench": "threshold_reference", "threads": torch.get_num_threads(), "results": results}, indent=2
            )
        )


if __name__ == "__main__":
    main()

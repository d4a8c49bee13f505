"""Objectives at matched compute: pre-train the `bert` (MLM+NSP), `electra` (generator MLM +
RTD) and `gpt` (causal LM) tiny presets on the Gutenberg corpus for the SAME training-FLOPs
budget (ptmlab's estimate: 6·N·tokens + attention, per backbone pass of each objective, the
ELECTRA generator included; see PretrainModule.flops_per_token), and print for each the steps
taken, tokens seen, median step time and final training loss (mean of the last 10 steps).

Losses of different objectives are not comparable numbers (an MLM+NSP sum, MLM + 50·RTD, a
next-token NLL); the point is the matched budget the downstream comparison starts from.

    .venv/bin/python bench/objectives.py [--flops 2e12] [--presets bert electra gpt]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import lightning.pytorch as pl
from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lightning_modules.data.pretrain_datamodule import PretrainDataModule
from lightning_modules.runtime.speed import split_trainer_config
from lightning_modules.stages.pretrain import build_pretrain_module
from ptmlab.config import compose_config


class FlopsBudget(pl.Callback):
    """Stops training once tokens_seen × flops_per_token reaches the budget; records step times
    and losses."""

    def __init__(self, budget: float):
        self.budget = budget
        self.step_times: list[float] = []
        self.losses: list[float] = []
        self._last: float | None = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        now = time.perf_counter()
        if self._last is not None:
            self.step_times.append(now - self._last)
        self._last = now
        self.losses.append(float(outputs["loss"]))
        if pl_module.tokens_seen * pl_module.flops_per_token >= self.budget:
            trainer.should_stop = True


def run_preset(preset: str, budget: float, cache_dir: str, block_size: int, batch_size: int) -> dict:
    cfg = compose_config(
        [
            f"experiment={preset}",
            f"paths.cache_dir={cache_dir}",
            f"data.block_size={block_size}",
            f"data.batch_size={batch_size}",
            "trainer.max_steps=100000",
            "scheduler=constant",
        ]
    )
    datamodule = PretrainDataModule(cfg.data, cfg.tokenizer, cfg.paths.cache_dir, seed=int(cfg.seed))
    datamodule.setup()
    pl.seed_everything(int(cfg.seed), verbose=False)
    module = build_pretrain_module(cfg, datamodule)
    budget_cb = FlopsBudget(budget)
    trainer_cfg, _ = split_trainer_config(OmegaConf.to_container(cfg.trainer, resolve=True))
    trainer_cfg.pop("_target_")
    trainer_cfg.update(
        enable_progress_bar=False,
        val_check_interval=None,
        limit_val_batches=0,
        enable_checkpointing=False,
        max_epochs=-1,
    )
    trainer = pl.Trainer(**trainer_cfg, callbacks=[budget_cb], logger=False)
    trainer.fit(module, train_dataloaders=datamodule.train_dataloader())
    tail = budget_cb.losses[-10:]
    return {
        "preset": preset,
        "objective": str(cfg.objective.name),
        "model": str(cfg.model.name),
        "flops_per_token": module.flops_per_token,
        "steps": int(trainer.global_step),
        "tokens": module.tokens_seen,
        "flops": module.tokens_seen * module.flops_per_token,
        "step_ms": 1000 * statistics.median(budget_cb.step_times[3:] or budget_cb.step_times),
        "final_loss": sum(tail) / len(tail),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flops", type=float, default=2e12, help="training-FLOPs budget per preset")
    parser.add_argument("--presets", nargs="+", default=["bert", "electra", "gpt"])
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--cache-dir", default=None, help="tokenizer/example cache (default: a temporary folder)")
    args = parser.parse_args()
    os.environ.setdefault("PTMLAB_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    corpus = Path(os.environ["PTMLAB_DATA_DIR"]) / "corpus" / "gutenberg_nltk"
    if not corpus.is_dir():
        sys.exit(f"Gutenberg corpus not found at {corpus} (set PTMLAB_DATA_DIR)")
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = args.cache_dir or tmp
        rows = [run_preset(p, args.flops, cache_dir, args.block_size, args.batch_size) for p in args.presets]
    print(
        f"\nmatched training-FLOPs budget: {args.flops:.3g} per preset (Gutenberg, block {args.block_size}, "
        f"batch {args.batch_size}, CPU threads {__import__('torch').get_num_threads()})"
    )
    header = (
        f"{'preset':<9}{'model':<14}{'objective':<11}{'FLOPs/token':>13}{'steps':>7}{'tokens':>10}"
        f"{'FLOPs':>10}{'step ms':>9}{'final loss':>12}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['preset']:<9}{r['model']:<14}{r['objective']:<11}{r['flops_per_token']:>13.3g}{r['steps']:>7}"
            f"{r['tokens']:>10}{r['flops']:>10.3g}{r['step_ms']:>9.1f}{r['final_loss']:>12.3f}"
        )


if __name__ == "__main__":
    main()

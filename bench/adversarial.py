"""Does adversarial fine-tuning buy robustness? Issue 25's comparison: the packaged MiniLM fine-tuned
on SST-2 (the realistic tests' recipe, tests/e2e/sst2_recipe.py) plainly and with FreeLB
(`defence=freelb`, its SST-2 defaults), over several seeds, each model then attacked by
stage=attack (`attack=deepwordbug` by default) on the same seeded sample of dev sentences. Prints,
per defence and seed, dev accuracy, clean accuracy and accuracy under attack on the sample,
success rate and perturbed-word ratio, then the means and FreeLB's margin over plain.

    OMP_NUM_THREADS=1 PTMLAB_DATA_DIR=../shared/data .venv/bin/python bench/adversarial.py \\
        [--seeds 1 2] [--examples 100] [--recipe deepwordbug] [--rows 8000] [--defences plain freelb pgd]

`--smoke`: the same loop on a tiny random model and a handful of rows (seconds), to show it runs.
Runs in-process under a temporary PTMLAB_HOME unless one is set.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "platform"))
sys.path.insert(0, str(REPO / "tests" / "e2e"))

DEFENCES = {"plain": [], "freelb": ["defence=freelb"], "pgd": ["defence=pgd"]}
WORDS = "the a film movie was good bad great awful is not it very and of to".split()
SMOKE = [
    "model=bert_tiny",
    "model.backbone.num_layers=2",
    "model.backbone.num_heads=2",
    "model.backbone.hidden_size=32",
    "model.backbone.intermediate_size=64",
    "tokenizer.vocab_size=80",
    "tokenizer.min_frequency=1",
    "data=text_files",
    "task=glue/sst2",
    "task.max_length=32",
    "stage.epochs=1",
    "stage.batch_size=8",
    "trainer.enable_progress_bar=false",
    "checkpoint_every_n_steps=0",
]


def finetune_overrides(args, work: Path) -> list[str]:
    if args.smoke:
        corpus = work / "corpus"
        corpus.mkdir(parents=True, exist_ok=True)
        rng = random.Random(0)
        (corpus / "doc.txt").write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(6)) for _ in range(100)))
        return [*SMOKE, f"data.corpus.path={corpus}", f"task.max_train_samples={args.rows}", "task.max_eval_samples=64"]
    from sst2_recipe import FULL_FINETUNING, recipe

    return recipe(FULL_FINETUNING, rows=args.rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--defences", nargs="+", default=["plain", "freelb"], choices=sorted(DEFENCES))
    parser.add_argument("--recipe", default="deepwordbug")
    parser.add_argument("--examples", type=int, default=100, help="attack.num_examples (one seeded sample for all)")
    parser.add_argument("--attack-seed", type=int, default=42)
    parser.add_argument("--rows", type=int, default=None, help="training rows (default: the recipe's 8,000)")
    parser.add_argument("--smoke", action="store_true", help="a tiny random model and a handful of rows")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.examples = args.rows or 32, min(args.examples, 8)

    work = Path(tempfile.mkdtemp(prefix="ptmlab-bench-adversarial-"))
    os.environ.setdefault("PTMLAB_HOME", str(work / "home"))
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    import torch

    from lightning_modules.stages.attack import run_attack
    from lightning_modules.stages.finetune import run_finetune
    from ptmlab.config import compose_config

    base = finetune_overrides(args, work)
    print(
        f"torch threads {torch.get_num_threads()}, {'smoke: tiny random model' if args.smoke else 'MiniLM SST-2'}, "
        f"attack={args.recipe} on {args.examples} dev sentences (seed {args.attack_seed}), seeds {args.seeds}"
    )
    print("| defence | seed | dev accuracy | clean (sample) | under attack | success rate | perturbed ratio |")
    print("|---|---|---|---|---|---|---|")
    under: dict[str, list[float]] = {}
    for defence in args.defences:
        for seed in args.seeds:
            run_dir = work / f"{defence}-{seed}"
            summary = run_finetune(
                compose_config(["stage=finetune", *base, *DEFENCES[defence], f"seed={seed}", f"+run_dir={run_dir}"])
            )
            attacked = run_attack(
                compose_config(
                    [
                        "stage=attack",
                        f"attack={args.recipe}",
                        f"source={run_dir}",
                        f"attack.num_examples={args.examples}",
                        f"seed={args.attack_seed}",
                        f"+run_dir={work / f'attack-{defence}-{seed}'}",
                    ]
                )
            )
            under.setdefault(defence, []).append(attacked["accuracy_under_attack"])
            ratio = attacked["perturbed_word_ratio"]
            print(
                f"| {defence} | {seed} | {summary['main_score']:.3f} | {attacked['clean_accuracy']:.3f} | "
                f"{attacked['accuracy_under_attack']:.3f} | {attacked['success_rate'] or 0:.3f} | "
                f"{'-' if ratio is None else f'{ratio:.3f}'} |",
                flush=True,
            )
    print()
    for defence, values in under.items():
        spread = f" ± {statistics.stdev(values):.3f}" if len(values) > 1 else ""
        print(f"{defence}: accuracy under {args.recipe} {statistics.mean(values):.3f}{spread} over {len(values)} seeds")
    if "plain" in under:
        for defence, values in under.items():
            if defence != "plain":
                margins = [d - p for d, p in zip(values, under["plain"])]
                print(
                    f"{defence} - plain, per seed: {', '.join(f'{m:+.3f}' for m in margins)}; "
                    f"mean {statistics.mean(margins):+.3f}"
                )


if __name__ == "__main__":
    main()

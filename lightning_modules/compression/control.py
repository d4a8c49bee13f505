"""Fair comparisons of methods that train after compressing (recovery fine-tuning after pruning,
low-rank or layer dropping, QAT, Theseus, distillation).

Such a model got training its source did not: its score over the source's mixes what the
compression lost with what the extra training gained (a pruned model can "retain" 105 %). So
the stage records that extra training (`extra_training`: steps, examples, the data, each loop)
and, with `compression.control=true` (the default), trains a control: the source itself (or
what the method names, `Compressed.control_start`: distillation's student before the teacher)
given exactly the same training with the task loss and no compression: the same loops in order,
epochs, learning rates, seed, hence the same examples in the same order (each loop's
`examples_digest`). Retention is then reported against the source and against the control;
with the control switched off the summary marks the retention as "with extra training".
"""

from __future__ import annotations

import hashlib

from torch import nn

from lightning_modules.compression.base import CompressContext, train_epochs
from lightning_modules.heads.evaluation import evaluate

CONTROL_PREFIX = "control"  # the control's loss curves and progress series


def extra_training(training: list[dict], task) -> dict | None:
    """What the loops in `training` trained, as the summary records it; None when nothing trained."""
    loops = [t for t in training if t.get("steps")]
    if not loops:
        return None
    split = task.data.splits[task.data.train_split]
    digest = hashlib.sha256("".join(t["examples_digest"] for t in loops).encode()).hexdigest()
    return {
        "steps": sum(t["steps"] for t in loops),
        "examples": sum(t["examples"] for t in loops),
        "epochs": sum(t["epochs"] for t in loops),
        "examples_digest": digest,
        "train_time_s": round(sum(t["train_time_s"] for t in loops), 3),
        "loops": [{k: t[k] for k in ("prefix", "epochs", "lr", "steps", "examples", "examples_digest")} for t in loops],
        "data": {
            "task": task.spec.name,
            "split": task.data.train_split,
            "rows": len(split.examples),
            "source": str(split.source),
        },
    }


def train_control(start: nn.Module, tokenizer, ctx: CompressContext, training: list[dict]) -> dict:
    """Replays the loops of `training` on `start` (trainable, in place) with the task loss, then
    scores it on the first eval split: the summary's control_* fields."""
    start.requires_grad_(True)
    replayed = [
        train_epochs(start, tokenizer, ctx, epochs=t["epochs"], lr=t["lr"], prefix=CONTROL_PREFIX)
        for t in training
        if t.get("steps")
    ]
    split = ctx.task.eval_splits[0].name
    metrics = evaluate(start, ctx.task, split, tokenizer=tokenizer)
    return {
        "control_score": metrics.get(ctx.task.spec.metric_key(ctx.task.spec.main_metric, split)),
        "control_metrics": metrics,
        "control_training": extra_training(replayed, ctx.task),
    }

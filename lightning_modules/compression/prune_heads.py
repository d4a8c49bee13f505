"""Structured attention-head pruning by importance (Michel et al. 2019, "Are Sixteen Heads Really
Better than One?"): a gate of 1 multiplies each head's output (artifacts/structural_edits.py
HeadGates); a head's importance is |∂L/∂gate| accumulated over `importance_batches` training
batches, normalised per layer (L2). Pruning is iterative: in `steps` rounds the globally least
important heads are removed (at least one head stays in every layer) and the importance is
measured again on the smaller model. Removed heads are sliced out of the projections, so the
parameter count and FLOPs really shrink; `finetune_epochs` of recovery follow."""

from __future__ import annotations

import torch

from lightning_modules.artifacts.structural_edits import HeadGates, attention_heads
from lightning_modules.compression.base import (
    CompressContext,
    Compressed,
    CompressionMethod,
    copy_model,
    train_epochs,
    train_loader,
)
from lightning_modules.compression.quantize_dynamic import refuse_quantized_source
from lightning_modules.heads.evaluation import task_loss
from ptmlab.contracts import ConfigError
from ptmlab.methods.compression import PruneHeadsParams


def head_importance(model, tokenizer, ctx: CompressContext, batches: int) -> list[torch.Tensor]:
    """Per layer, a vector of head importances (normalised per layer)."""
    heads = attention_heads(model.backbone)
    gates = HeadGates(heads)
    scores = [torch.zeros(h.num_heads) for h in heads]
    was_training = model.training
    model.eval()  # no dropout: the gradient of the gate, not of a random sub-network
    try:
        for i, batch in enumerate(train_loader(ctx, model, tokenizer)):
            if i >= batches:
                break
            loss = task_loss(ctx.task.spec, model(batch), batch["labels"])
            grads = torch.autograd.grad(loss, gates.gates)
            for s, g in zip(scores, grads):
                s += g.abs()
    finally:
        gates.remove()
        model.train(was_training)
    return [s / s.norm().clamp_min(1e-12) for s in scores]


class PruneHeads(CompressionMethod):
    declaration = PruneHeadsParams
    params: PruneHeadsParams  # the validated declaration (CompressionMethod.__init__)

    name = "prune_heads"

    def check(self, source, ctx: CompressContext) -> None:

        refuse_quantized_source(source, self.name)
        if any(op.get("op") == "low_rank" for op in source.manifest.get("compression") or ()):
            raise ConfigError(
                "compression=prune_heads: the source's projections are low-rank factors; prune heads first"
            )
        heads = attention_heads(source.model.backbone)  # ConfigError for an architecture without known heads
        total = sum(h.num_heads for h in heads)
        if round(self.params.fraction * total) > total - len(heads):
            raise ConfigError(
                f"compression.fraction={self.params.fraction}: {total} heads in {len(heads)} layers; at most "
                f"{total - len(heads)} can go (one head stays in every layer)"
            )

    def compress(self, source, ctx: CompressContext) -> Compressed:
        model = copy_model(source)
        heads = attention_heads(model.backbone)
        before = [h.num_heads for h in heads]
        target = round(self.params.fraction * sum(before))
        pruned = 0
        removed: list[list[int]] = [[] for _ in heads]  # original indices of the removed heads
        alive = [list(range(n)) for n in before]  # original index of each current head
        for step in range(self.params.steps):
            goal = round(target * (step + 1) / self.params.steps)
            if goal <= pruned:
                continue
            importance = head_importance(model, source.tokenizer, ctx, self.params.importance_batches)
            ranked = sorted((float(v), layer, h) for layer, imp in enumerate(importance) for h, v in enumerate(imp))
            drop: dict[int, set[int]] = {}
            for _, layer, h in ranked:
                if pruned + sum(map(len, drop.values())) >= goal:
                    break
                if len(alive[layer]) - len(drop.get(layer, ())) > 1:
                    drop.setdefault(layer, set()).add(h)
            for layer, hs in drop.items():
                keep = [h for h in range(len(alive[layer])) if h not in hs]
                removed[layer] += [alive[layer][h] for h in sorted(hs)]
                alive[layer] = [alive[layer][h] for h in keep]
                attention_heads(model.backbone)[layer].keep(keep)
            pruned += sum(map(len, drop.values()))
            if ctx.log is not None:
                ctx.log({"prune_heads/pruned": float(pruned)}, step)
        trained = train_epochs(model, source.tokenizer, ctx, epochs=self.params.finetune_epochs, lr=self.params.lr)
        after = [h.num_heads for h in attention_heads(model.backbone)]
        numbers = {
            "heads_before": sum(before),
            "heads_after": sum(after),
            "heads_per_layer": after,
            "pruned_heads": removed,
            "recovery_steps": trained["steps"],
            "train_time_s": trained["train_time_s"],
        }
        return Compressed(model, [{"op": "prune_heads", "heads_per_layer": after}], numbers, training=[trained])

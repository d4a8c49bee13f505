"""Global unstructured magnitude pruning with `torch.nn.utils.prune`: the smallest-magnitude
weights over every Linear of the layers (`scope=encoder`: an encoder–decoder's encoder and decoder
layers; `all` adds the head and any other Linear)
are masked to reach `sparsity`, either at once before the recovery fine-tune (`one_shot`) or
along it on the cubic schedule of Zhu & Gupta 2017 (`cubic`: s_t = s·(1 − (1 − t/(¾T))³), masks
updated every `prune_every` steps). Masks stay applied during training and are made permanent
at the end. The weights stay stored dense, so the saved size does not change: the summary
reports the real nonzero count and the sparsity reached over the pruned weights."""

from __future__ import annotations

from torch import nn
from torch.nn.utils import prune

from lightning_modules.compression.base import CompressContext, Compressed, CompressionMethod, copy_model, train_epochs
from lightning_modules.compression.quantize_dynamic import refuse_quantized_source
from ptmlab.contracts import ConfigError
from ptmlab.methods.compression import PruneMagnitudeParams


def prunable_linears(model, scope: str) -> list[tuple[str, nn.Module]]:
    """Every Linear in `scope` (and Hugging Face GPT-2's Conv1D: a Linear with its weight transposed)."""
    from transformers.pytorch_utils import Conv1D

    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, (nn.Linear, Conv1D))]
    if scope == "all":
        return linears
    inside = {
        id(m) for stack in model.backbone.layer_stacks() for layer in stack.layer_modules() for m in layer.modules()
    }
    return [(n, m) for n, m in linears if id(m) in inside]


def zeros(linears) -> int:
    return sum(int((m.weight == 0).sum()) for _, m in linears)


class PruneMagnitude(CompressionMethod):
    declaration = PruneMagnitudeParams
    params: PruneMagnitudeParams  # the validated declaration (CompressionMethod.__init__)

    name = "prune_magnitude"
    takes_generators = True

    def check(self, source, ctx: CompressContext) -> None:

        refuse_quantized_source(source, self.name)
        if self.params.schedule == "cubic" and self.params.finetune_epochs < 1:
            raise ConfigError("compression.schedule=cubic prunes during fine-tuning: compression.finetune_epochs >= 1")
        if not prunable_linears(source.model, self.params.scope):
            raise ConfigError(f"compression.scope={self.params.scope}: no Linear layer to prune")

    def compress(self, source, ctx: CompressContext) -> Compressed:
        model = copy_model(source)
        linears = prunable_linears(model, self.params.scope)
        total = sum(m.weight.numel() for _, m in linears)
        target = int(round(self.params.sparsity * total))
        params = [(m, "weight") for _, m in linears]

        def prune_to(n_zeros: int) -> None:
            more = n_zeros - zeros(linears)
            if more > 0:
                prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=int(more))

        on_step = None
        if self.params.schedule == "one_shot":
            prune_to(target)
        else:

            def on_step(step: int, steps: int) -> None:
                if step % self.params.prune_every == 0 or step == steps - 1:
                    t = min(1.0, step / max(1.0, 0.75 * steps))
                    prune_to(int(round(target * (1 - (1 - t) ** 3))))

        trained = train_epochs(
            model, source.tokenizer, ctx, epochs=self.params.finetune_epochs, lr=self.params.lr, on_step=on_step
        )
        if self.params.schedule == "cubic":
            prune_to(target)
        for m, name in params:
            if prune.is_pruned(m):
                prune.remove(m, name)  # the mask becomes the weights: zeros stay zeros
        reached = zeros(linears) / total
        numbers = {
            "target_sparsity": self.params.sparsity,
            "sparsity": round(reached, 6),
            "pruned_weights": total,
            "zero_weights": zeros(linears),
            "recovery_steps": trained["steps"],
            "train_time_s": trained["train_time_s"],
            "storage": "dense",
        }
        return Compressed(model, [], numbers, training=[trained])

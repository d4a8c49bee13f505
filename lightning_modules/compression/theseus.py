"""BERT-of-Theseus progressive module replacing (Xu et al. 2020): the source's layers are cut
into `successor_layers` blocks; each block gets one successor layer (initialised from the
block's first layer). While training, each block is replaced by its successor with probability
p, which rises linearly from `replace_rate` to `replace_rate_end`; only successors train (the
predecessor, its embeddings and head stay frozen). Then the successor alone is kept, with
optional `finetune_epochs` of the whole compact model."""

from __future__ import annotations

import copy
import random

from torch import nn

from lightning_modules.artifacts.structural_edits import set_layers
from lightning_modules.compression.base import CompressContext, Compressed, CompressionMethod, copy_model, train_epochs
from lightning_modules.compression.distill import with_num_layers
from lightning_modules.compression.quantize_dynamic import refuse_quantized_source
from ptmlab.contracts import ConfigError
from ptmlab.methods.compression import TheseusParams


def blocks_of(layers: list[nn.Module], n: int) -> list[list[nn.Module]]:
    k = len(layers) // n
    return [layers[i * k : (i + 1) * k] if i < n - 1 else layers[i * k :] for i in range(n)]


class Theseus(CompressionMethod):
    declaration = TheseusParams
    params: TheseusParams  # the validated declaration (CompressionMethod.__init__)

    name = "theseus"

    def check(self, source, ctx: CompressContext) -> None:

        refuse_quantized_source(source, self.name)
        n = int(source.model.backbone.num_layers)
        if not 1 <= self.params.successor_layers < n:
            raise ConfigError(
                f"compression.successor_layers={self.params.successor_layers}: the source has {n} layers "
                f"(a successor has 1..{n - 1})"
            )

    def compress(self, source, ctx: CompressContext) -> Compressed:
        model = copy_model(source)
        layers = list(model.backbone.layer_modules())
        blocks = blocks_of(layers, self.params.successor_layers)
        successors = [copy.deepcopy(block[0]) for block in blocks]
        model.requires_grad_(False)
        for s in successors:
            s.requires_grad_(True)
        rng = random.Random(ctx.seed)
        end = self.params.replace_rate_end

        def on_step(step: int, total: int) -> None:
            p = self.params.replace_rate + (end - self.params.replace_rate) * step / max(1, total - 1)
            replaced = [rng.random() < p for _ in blocks]
            if not any(replaced):  # at least one successor in the path, or the step trains nothing
                replaced[rng.randrange(len(blocks))] = True
            chosen = []
            for block, successor, swap in zip(blocks, successors, replaced):
                chosen += [successor] if swap else block
            set_layers(model.backbone, chosen, count=False)

        named_params = [named for s in successors for named in s.named_parameters()]
        trained = train_epochs(
            model,
            source.tokenizer,
            ctx,
            epochs=self.params.epochs,
            lr=self.params.lr,
            on_step=on_step,
            named_params=named_params,
            prefix="theseus",
        )
        set_layers(model.backbone, successors)
        model.requires_grad_(True)
        tuned = train_epochs(model, source.tokenizer, ctx, epochs=self.params.finetune_epochs, lr=self.params.lr)
        numbers = {
            "successor_layers": self.params.successor_layers,
            "replacing_steps": trained["steps"],
            "recovery_steps": tuned["steps"],
            "train_time_s": trained["train_time_s"] + tuned["train_time_s"],
        }
        return Compressed(
            model,
            [],
            numbers,
            model_cfg=with_num_layers(source.manifest["model"], len(successors)),
            training=[trained, tuned],
        )

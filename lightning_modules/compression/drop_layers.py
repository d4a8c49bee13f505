"""Layer dropping (Fan et al. 2019; Sajjad et al. 2020): keep every k-th layer (`keep_every`),
the bottom n (`keep_bottom`) or an explicit list (`layers`, 0-based), with an optional short
recovery fine-tune. The model is saved with its own, shallower config. An encoder–decoder drops
from its encoder and its decoder alike (the same rule on each side; the decoder's layers are what
each generated token runs through)."""

from __future__ import annotations

from lightning_modules.artifacts.structural_edits import droppable_stacks, keep_layers, with_layer_counts
from lightning_modules.compression.base import CompressContext, Compressed, CompressionMethod, copy_model, train_epochs
from lightning_modules.compression.quantize_dynamic import refuse_quantized_source
from ptmlab.contracts import ConfigError
from ptmlab.methods.compression import DropLayersParams


class DropLayers(CompressionMethod):
    declaration = DropLayersParams
    params: DropLayersParams  # the validated declaration (CompressionMethod.__init__)

    name = "drop_layers"
    takes_generators = True

    def kept(self, n: int) -> list[int]:
        if self.params.layers is not None:
            bad = [i for i in self.params.layers if not 0 <= i < n]
            if bad or not self.params.layers:
                raise ConfigError(
                    f"compression.layers={self.params.layers}: layer {bad[0] if bad else '-'} does not exist "
                    f"(the source has layers 0..{n - 1})"
                )
            return sorted(set(self.params.layers))
        if self.params.keep_bottom is not None:
            if self.params.keep_bottom > n:
                raise ConfigError(f"compression.keep_bottom={self.params.keep_bottom}: the source has {n} layers")
            return list(range(self.params.keep_bottom))
        if self.params.keep_every is not None:
            return list(range(self.params.keep_every - 1, n, self.params.keep_every)) or [n - 1]
        raise ConfigError("compression.layers, keep_bottom and keep_every are all null: set one")

    def check(self, source, ctx: CompressContext) -> None:

        refuse_quantized_source(source, self.name)
        for stack in droppable_stacks(source.model.backbone):
            self.kept(int(stack.num_layers))

    def compress(self, source, ctx: CompressContext) -> Compressed:
        model = copy_model(source)
        kept = []
        for stack in droppable_stacks(model.backbone):
            kept.append(self.kept(int(stack.num_layers)))
            keep_layers(stack, kept[-1])
        trained = train_epochs(model, source.tokenizer, ctx, epochs=self.params.finetune_epochs, lr=self.params.lr)
        numbers = {"kept_layers": kept[0], "recovery_steps": trained["steps"], "train_time_s": trained["train_time_s"]}
        if len(kept) > 1:  # an encoder–decoder: kept_layers are the encoder's
            numbers["kept_decoder_layers"] = kept[1]
        return Compressed(
            model,
            [],
            numbers,
            model_cfg=with_layer_counts(source.manifest["model"], model.backbone),
            training=[trained],
        )

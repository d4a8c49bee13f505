"""Half-precision weights: the whole model cast to bfloat16 (default; CPUs with AVX-512 BF16/AMX
run it natively) or float16, saved in that dtype (half the bytes). Logits are read as float32."""

from __future__ import annotations

import torch

from lightning_modules.compression.base import CompressContext, Compressed, CompressionMethod, copy_model
from lightning_modules.compression.quantize_dynamic import refuse_quantized_source
from ptmlab.contracts import ConfigError
from ptmlab.methods.compression import CastHalfParams


class CastHalf(CompressionMethod):
    declaration = CastHalfParams
    params: CastHalfParams  # the validated declaration (CompressionMethod.__init__)

    name = "cast_half"

    def check(self, source, ctx: CompressContext) -> None:

        refuse_quantized_source(source, self.name)
        if self.params.finetune_epochs:
            raise ConfigError(
                f"compression.finetune_epochs={self.params.finetune_epochs}: cast_half does not train "
                f"(fine-tune the float32 model first)"
            )

    def compress(self, source, ctx: CompressContext) -> Compressed:
        model = copy_model(source).eval().to(getattr(torch, self.params.dtype))
        return Compressed(model, [{"op": "cast", "dtype": self.params.dtype}], {"dtype": self.params.dtype})

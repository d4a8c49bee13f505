"""Quantization-aware training, then int8: every Linear's weight is fake-quantized (symmetric,
per output channel, int8, straight-through gradient) during a short fine-tune
(`finetune_epochs`), so the weights learn to sit where int8 rounds them; then the model is
converted exactly as `quantize_dynamic` converts (int8 Linear weights, activations quantized per
batch at run time, weight-only int8 embeddings). Activations are not fake-quantized during
training: with dynamic activation quantization at inference there are no fixed activation
ranges to learn."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parametrize

from lightning_modules.artifacts.quantization import get_backend
from lightning_modules.compression.base import CompressContext, Compressed, copy_model, train_epochs
from lightning_modules.compression.quantize_dynamic import QuantizeDynamic
from ptmlab.contracts import ConfigError
from ptmlab.methods.compression import QuantizeQATParams


class FakeQuantizedRows(nn.Module):
    """W -> W rounded to int8 per output row (symmetric), gradient passed straight through."""

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        scale = (w.detach().abs().amax(dim=1).float() / 127.5).clamp_min(1e-8)
        zero = torch.zeros(w.shape[0], dtype=torch.int32, device=w.device)
        return torch.fake_quantize_per_channel_affine(w, scale, zero, 0, -128, 127)


class QuantizeQAT(QuantizeDynamic):
    declaration = QuantizeQATParams
    params: QuantizeQATParams  # the validated declaration (CompressionMethod.__init__)

    name = "quantize_qat"
    takes_generators = False  # its fake-quantized training is not wired to a generator's twin

    def check(self, source, ctx: CompressContext) -> None:
        super().check(source, ctx)
        if self.params.finetune_epochs < 1:
            raise ConfigError(
                f"compression.finetune_epochs={self.params.finetune_epochs}: quantization-aware training "
                f"trains at least one epoch (quantize_dynamic quantizes without training)"
            )

    def compress(self, source, ctx: CompressContext) -> Compressed:
        model = copy_model(source)
        linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
        for m in linears:
            parametrize.register_parametrization(m, "weight", FakeQuantizedRows())
        trained = train_epochs(
            model, source.tokenizer, ctx, epochs=self.params.finetune_epochs, lr=self.params.lr, prefix="qat"
        )
        for m in linears:
            parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
        model.eval()
        get_backend(self.params.backend).quantize_dynamic(model, embeddings=self.params.embeddings)
        edit = {
            "op": "quantize",
            "backend": self.params.backend,
            "embeddings": self.params.embeddings,
            "scheme": "qat_int8",
        }
        return Compressed(
            model,
            [edit],
            {"recovery_steps": trained["steps"], "train_time_s": trained["train_time_s"]},
            training=[trained],
        )

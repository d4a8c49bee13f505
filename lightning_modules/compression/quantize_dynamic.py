"""Post-training dynamic int8 quantization: int8 weights of every Linear (per output channel;
activations quantized per batch at run time) and, by default, weight-only int8 embedding tables
(per-row scales). MiniLM's embeddings are over half its parameters, so leaving them in fp32
would cap the size ratio near 0.65. A generator's token table is also its output projection (the
logits of every decoding step), as is that of a decoder scoring choices by their log-likelihood,
so it stays float (`embeddings: null` picks that; `true` on such a model is refused) and its int8 Linears are what its Hugging Face twin decodes with
(models/int8_twin.py). The backend is artifacts/quantization.py's."""

from __future__ import annotations

from lightning_modules.artifacts.quantization import get_backend
from lightning_modules.compression.base import CompressContext, Compressed, CompressionMethod, copy_model
from ptmlab.methods.compression import QuantizeDynamicParams


def refuse_quantized_source(source, method: str) -> None:
    from ptmlab.contracts import ConfigError

    if any(op.get("op") == "quantize" for op in source.manifest.get("compression") or ()):
        raise ConfigError(
            f"compression={method}: source={source.folder} is already quantized "
            f"(quantization is the last step of a chain)"
        )


def token_table_is_output(source) -> bool:
    """The model's logits are its token table times its states: a generator, or a decoder that
    scores each choice by its log-likelihood (heads/multiple_choice_model.py)."""
    return source.task.is_generation or getattr(source.model, "scoring", None) == "log_likelihood"


class QuantizeDynamic(CompressionMethod):
    declaration = QuantizeDynamicParams
    params: QuantizeDynamicParams  # the validated declaration (CompressionMethod.__init__)

    name = "quantize_dynamic"
    takes_generators = True

    def quantizes_embeddings(self, source) -> bool:
        return not token_table_is_output(source) if self.params.embeddings is None else self.params.embeddings

    def check(self, source, ctx: CompressContext) -> None:
        get_backend(self.params.backend)
        refuse_quantized_source(source, self.name)
        if self.params.embeddings and token_table_is_output(source):
            from ptmlab.contracts import ConfigError

            what = "generation" if source.task.is_generation else "multiple choice scored by log-likelihood"
            raise ConfigError(
                f"compression.embeddings=true: task {source.task.name} is {what}, whose token "
                f"table is also its output layer; it stays float (compression.embeddings=null or false)"
            )
        if any(op.get("op") == "cast" for op in source.manifest.get("compression") or ()):
            from ptmlab.contracts import ConfigError

            raise ConfigError(
                f"compression={self.name}: source={source.folder} was cast to half precision; "
                f"quantize the float32 model"
            )

    def compress(self, source, ctx: CompressContext) -> Compressed:
        model = copy_model(source).eval()
        embeddings = self.quantizes_embeddings(source)
        get_backend(self.params.backend).quantize_dynamic(model, embeddings=embeddings)
        edit = {"op": "quantize", "backend": self.params.backend, "embeddings": embeddings, "scheme": "dynamic_int8"}
        return Compressed(model, [edit])

"""The int8 quantization backend behind one small interface, and how a quantized model is saved.

`torch.ao.quantization` is deprecated (torch 2.13) in favour of torchao, whose int8 path was
reported 2.3–3.1× slower than torch.ao for BERT on CPU without torch.compile (pytorch/ao#3157,
#4365); torchao is not installed here, so `torch.ao` is the one backend. A method asks for a
backend by name (`compression.backend`); `get_backend` refuses one missing on this machine
with a ConfigError naming the key, before any training.

A quantized model is saved without pickles: every ordinary tensor of its state dict as is, and
each quantized module's weight as its int8/uint8 values plus per-channel scales and zero points
(`<module>.qweight.int_repr`, `.qweight.scales`, `.qweight.zero_points`, `.qbias`). Loading
builds the float architecture, quantizes it again (same settings, recorded in the manifest's
quantize edit) and overwrites every quantized weight with the saved one, so the reloaded model
computes exactly what the saved one did.
"""

from __future__ import annotations

import importlib.util
import warnings

import torch
from torch import nn

from lightning_modules.models.int8_twin import is_dynamic_int8
from ptmlab.contracts import ConfigError

QWEIGHT = ".qweight."
QBIAS = ".qbias"


class QuantizationBackend:
    """What a quantization method needs from a backend."""

    name: str = ""

    def available(self) -> bool:
        raise NotImplementedError

    def quantize_dynamic(self, model: nn.Module, *, embeddings: bool) -> nn.Module:
        """int8 weights of every Linear (activations quantized per batch at run time) and, with
        `embeddings`, weight-only int8 embedding tables (per-row scales). In place; returns model."""
        raise NotImplementedError


class TorchAOBackend(QuantizationBackend):
    """torch.ao.quantization eager mode (fbgemm/x86 kernels on CPU)."""

    name = "torch.ao"

    def available(self) -> bool:
        return hasattr(torch.ao, "quantization") and hasattr(torch.ao.quantization, "quantize_dynamic")

    def quantize_dynamic(self, model: nn.Module, *, embeddings: bool) -> nn.Module:
        from torch.ao.quantization import (
            float_qparams_weight_only_qconfig,
            per_channel_dynamic_qconfig,
            quantize_dynamic,
        )

        spec: dict = {nn.Linear: per_channel_dynamic_qconfig}
        if embeddings:
            spec[nn.Embedding] = float_qparams_weight_only_qconfig
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=DeprecationWarning)
            warnings.simplefilter("ignore", category=UserWarning)
            return quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)


class TorchAOPackageBackend(QuantizationBackend):
    """torchao (the successor package): known by name so a config naming it gets a clear refusal
    where it is not installed; not wired up while it is absent from the environment."""

    name = "torchao"

    def available(self) -> bool:
        return importlib.util.find_spec("torchao") is not None

    def quantize_dynamic(self, model: nn.Module, *, embeddings: bool) -> nn.Module:  # pragma: no cover
        raise ConfigError("compression.backend=torchao: not supported by this ptmlab yet (use torch.ao)")


BACKENDS: dict[str, QuantizationBackend] = {b.name: b for b in (TorchAOBackend(), TorchAOPackageBackend())}


def get_backend(name: str, key: str = "compression.backend") -> QuantizationBackend:
    backend = BACKENDS.get(str(name))
    if backend is None:
        raise ConfigError(f"{key}={name}: unknown quantization backend (known: {', '.join(BACKENDS)})")
    if not backend.available():
        raise ConfigError(f"{key}={name}: this quantization backend is not installed on this machine")
    return backend


# -- saving and loading ---------------------------------------------------------------------------
def _quantized_modules(model: nn.Module):
    for name, module in model.named_modules():
        if is_dynamic_int8(module):
            yield name, module


def _plain_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's parameters and buffers outside its quantized modules (those are packed)."""
    quantized = {name for name, _ in _quantized_modules(model)}
    out = {}
    for key, value in [*model.named_parameters(), *model.named_buffers()]:
        if key.rpartition(".")[0] not in quantized:
            out[key] = value
    return out


def quantized_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Plain tensors only: what safetensors stores for a quantized model (module docstring)."""
    out = {key: value.detach().clone().contiguous() for key, value in _plain_tensors(model).items()}
    for name, module in _quantized_modules(model):
        w = module.weight()
        out[f"{name}{QWEIGHT}int_repr"] = w.int_repr().contiguous()
        out[f"{name}{QWEIGHT}scales"] = w.q_per_channel_scales().contiguous()
        out[f"{name}{QWEIGHT}zero_points"] = w.q_per_channel_zero_points().contiguous()
        bias = module.bias() if callable(getattr(module, "bias", None)) else None
        if bias is not None:
            out[f"{name}{QBIAS}"] = bias.detach().clone().contiguous()
    return out


def load_quantized_state(model: nn.Module, tensors: dict[str, torch.Tensor], where: str) -> None:
    """Into a model quantized with the saved settings: the plain tensors, then each quantized weight."""
    from ptmlab.contracts import BackboneError

    plain = {k: v for k, v in tensors.items() if QWEIGHT not in k and not k.endswith(QBIAS)}
    expected = _plain_tensors(model)
    missing, unexpected = sorted(set(expected) - set(plain)), sorted(set(plain) - set(expected))
    if missing or unexpected:
        bad = (missing or unexpected)[0]
        raise BackboneError(f"{where}: tensor {bad} {'missing' if missing else 'unexpected'} for the quantized model")
    with torch.no_grad():
        for key, target in expected.items():
            if target.shape != plain[key].shape:
                raise BackboneError(
                    f"{where}: {key} has shape {list(plain[key].shape)}, the model needs {list(target.shape)}"
                )
            target.copy_(plain[key])
    for name, module in _quantized_modules(model):
        try:
            q = torch._make_per_channel_quantized_tensor(
                tensors[f"{name}{QWEIGHT}int_repr"],
                tensors[f"{name}{QWEIGHT}scales"],
                tensors[f"{name}{QWEIGHT}zero_points"],
                0,
            )
        except KeyError as exc:
            raise BackboneError(f"{where}: no tensor {exc.args[0]} for quantized module {name}") from None
        if hasattr(module, "set_weight_bias"):
            module.set_weight_bias(q, tensors.get(f"{name}{QBIAS}"))
        else:
            module.set_weight(q)


def quantized_counts(model: nn.Module) -> tuple[int, int]:
    """(elements, nonzero elements) of the quantized weights (parameters() does not see them)."""
    total = nonzero = 0
    for _, module in _quantized_modules(model):
        w = module.weight().dequantize()
        total += w.numel()
        nonzero += int(torch.count_nonzero(w))
        bias = module.bias() if callable(getattr(module, "bias", None)) else None
        if bias is not None:
            total += bias.numel()
            nonzero += int(torch.count_nonzero(bias))
    return total, nonzero

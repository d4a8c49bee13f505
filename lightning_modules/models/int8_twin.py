"""The Hugging Face twin of a generator whose Linears were quantized to dynamic int8 (compression=
quantize_dynamic): `generate()` must run the very int8 weights the task model holds, so the twin is
built from a float copy (every int8 Linear dequantized, so the conversion maps the same numbers)
and then each of the twin's projections is replaced by the task model's own int8 module (shared,
not copied): what is decoded, measured, saved and reloaded is one set of int8 weights.

A backbone names the correspondence (`hf_generator_linears()`: twin module -> its own Linear(s));
GPT-2's fused query/key/value projection is the three int8 Linears side by side (their outputs
concatenated, which is what the fused Conv1D computes), and its other Conv1Ds (x·W + b) become the
Linears they were converted from (x·Wᵀ + b).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ptmlab.contracts import BackboneError


def is_dynamic_int8(module: nn.Module) -> bool:
    """A quantized module whose weight is packed (`weight()` a method): torch.ao dynamic Linear."""
    w = getattr(module, "weight", None)
    return callable(w) and not isinstance(w, torch.Tensor) and hasattr(module, "_packed_params")


def dynamic_int8_modules(model: nn.Module) -> dict[str, nn.Module]:
    return {name: m for name, m in model.named_modules() if is_dynamic_int8(m)}


def _set_submodule(root: nn.Module, name: str, new: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, child, new)


def dequantized_copy(backbone: nn.Module) -> nn.Module:
    """A deep copy with a float nn.Linear (the dequantized weights) in place of every int8 one."""
    out = copy.deepcopy(backbone)
    for name, module in dynamic_int8_modules(out).items():
        weight, bias = module.weight().dequantize(), module.bias()
        linear = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
        with torch.no_grad():
            linear.weight.copy_(weight)
            if bias is not None:
                linear.bias.copy_(bias)
        _set_submodule(out, name, linear)
    return out


class ConcatenatedLinears(nn.Module):
    """Several Linears of one input, outputs concatenated on the last dim (a fused projection)."""

    def __init__(self, parts: list[nn.Module]):
        super().__init__()
        self.parts = nn.ModuleList(parts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([part(x) for part in self.parts], dim=-1)  # B×T×(ΣO)


def int8_twin(backbone: nn.Module):
    """The twin (`to_hf_generator()`) running `backbone`'s int8 Linears, or None without a twin."""
    ours = dynamic_int8_modules(backbone)
    twin = dequantized_copy(backbone).to_hf_generator()
    if twin is None:
        return None
    covered = set()
    for theirs, names in backbone.hf_generator_linears().items():
        if not all(n in ours for n in names):
            continue  # a float projection (T5's unscaled query) stays as converted
        parts = [ours[n] for n in names]
        _set_submodule(twin, theirs, parts[0] if len(parts) == 1 else ConcatenatedLinears(parts))
        covered.update(names)
    if set(ours) - covered:
        raise BackboneError(
            f"{type(backbone).__name__}: int8 module {sorted(set(ours) - covered)[0]} has no place in "
            f"its Hugging Face twin (hf_generator_linears)"
        )
    return twin.eval()

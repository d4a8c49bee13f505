"""LoRA (Hu et al. 2021): each target Linear computes W·x + b + (alpha/rank)·B·A·x with W frozen,
A (rank×in, random) and B (out×rank, zero) trained, so training starts from the pre-trained model.
The backbone is frozen; the task head trains.

The low-rank pair is `peft`'s LoRA layer, injected into any backbone (ptmlab's own Transformers
and Hugging Face checkpoints alike: peft wraps nn.Linear modules, whatever model holds them, and
Hugging Face's `Conv1D` — GPT-2's c_attn/c_proj/c_fc, a Linear whose weight is stored in×out —
with peft's `fan_in_fan_out=True`).
`target_modules` are matched as peft matches them: a module whose dotted name ends in the given
name (`query` matches `…attention.self.query` and ptmlab's `…attention.query`).

`merge=true` folds B·A into W after training (`finalize`) and puts the plain Linear back, so the
exported task model and backbone are ordinary ones, served at the base model's speed; the delta
(A, B and the head) is still written to export/delta.safetensors before the merge.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from ptmlab.contracts import ConfigError
from ptmlab.methods.adaptation import LoRAParams


def _conv1d_class() -> type | None:
    try:  # transformers is imported by every Hugging Face backbone; without it there is no Conv1D to adapt
        from transformers.pytorch_utils import Conv1D
    except ImportError:
        return None
    return Conv1D


def _linear_names(backbone: nn.Module) -> dict[str, nn.Module]:
    """Every layer LoRA can adapt: nn.Linear and Hugging Face's Conv1D (GPT-2)."""
    kinds = tuple(k for k in (nn.Linear, _conv1d_class()) if k is not None)
    return {name: m for name, m in backbone.named_modules() if isinstance(m, kinds)}


def _features(layer: nn.Module) -> tuple[int, int]:
    """(in, out) of a Linear or a Conv1D (whose weight is in×out: nx inputs, nf outputs)."""
    if isinstance(layer, nn.Linear):
        return layer.in_features, layer.out_features
    return int(layer.nx), int(layer.nf)


def _matches(name: str, target: str) -> bool:
    return name == target or name.endswith("." + target)


class LoRA(Adaptation):
    declaration = LoRAParams
    takes_declaration = True  # built as LoRA(LoRAParams), never from loose keywords

    name = "lora"
    checks_backbone_layers = True  # a target that matches no Linear, a rank larger than a layer

    def __init__(self, params: LoRAParams | None = None, merged: bool = False, **values: Any):
        """`params`: the validated declaration, which alone states each parameter, its default and
        its bounds (`build_adaptation` passes it); in code, its values as keywords (`LoRA(rank=4)`),
        validated the same way. `merged`: a saved task model whose update is already in its weights."""
        self.params = params = self.declared_params(params, values)
        self.rank, self.alpha, self.dropout = params.rank, float(params.alpha), params.dropout
        self.target_modules = list(params.target_modules)
        self.merge = params.merge
        self.merged = bool(merged)

    def targets(self, backbone: nn.Module) -> dict[str, nn.Module]:
        """The Linear (or Conv1D) layers LoRA adapts; ConfigError naming the key and value for a target that
        matches nothing (with the names there are) or a rank larger than a layer allows."""
        linears = _linear_names(backbone)
        chosen: dict[str, nn.Linear] = {}
        for target in self.target_modules:
            found = {n: m for n, m in linears.items() if _matches(n, target)}
            if not found:
                leaves = sorted({n.rsplit(".", 1)[-1] for n in linears})
                raise ConfigError(
                    f"adaptation.target_modules: '{target}' matches no Linear layer of "
                    f"{type(backbone).__name__}; its Linear layers are named: {', '.join(leaves)}"
                )
            chosen.update(found)
        for name, linear in chosen.items():
            fan_in, fan_out = _features(linear)
            if self.rank > min(fan_in, fan_out):
                raise ConfigError(
                    f"adaptation.rank={self.rank} is larger than layer {name} allows "
                    f"({fan_in}→{fan_out}: rank ≤ {min(fan_in, fan_out)})"
                )
        return chosen

    def check_backbone(self, backbone: nn.Module) -> None:
        self.targets(backbone)

    def insert_modules(self, model: nn.Module) -> list[nn.Module]:
        if self.merged:
            return []  # the update is part of the saved weights: a plain backbone
        from peft import LoraConfig, inject_adapter_in_model

        chosen = self.targets(model.backbone)
        # Conv1D keeps its weight in×out: peft must transpose B·A before adding it (GPT-2's layers)
        fan_in_fan_out = any(not isinstance(m, nn.Linear) for m in chosen.values())
        config = LoraConfig(
            r=self.rank,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            use_rslora=self.params.use_rslora,
            target_modules=list(self.target_modules),
            bias="none",
            fan_in_fan_out=fan_in_fan_out,
        )
        inject_adapter_in_model(config, model.backbone)
        return [m for m in model.backbone.modules() if _is_lora_layer(m)]

    def prepare(self, model: nn.Module) -> None:
        layers = self.insert_modules(model)
        set_trainable([model.backbone], False)
        for layer in layers:
            set_trainable([layer.lora_A, layer.lora_B], True)
        set_trainable([model.head], True)

    def finalize(self, model: nn.Module) -> None:
        if self.merge:
            merge_lora(model.backbone)
            self.merged = True

    def saved_node(self, node: dict) -> dict:
        return {**node, "merged": self.merged}


def _is_lora_layer(module: nn.Module) -> bool:
    from peft.tuners.lora import LoraLayer

    return isinstance(module, LoraLayer)


def has_lora(root: nn.Module) -> bool:
    return any(_is_lora_layer(m) for m in root.modules())


def merge_lora(root: nn.Module) -> int:
    """Folds every LoRA layer's B·A into its base Linear and puts the plain Linear back in its
    place; returns how many were merged."""
    found = [(name, m) for name, m in root.named_modules() if _is_lora_layer(m)]
    for name, layer in found:
        layer.merge(safe_merge=True)  # safe_merge: refuses a NaN/inf result instead of writing it
        root.set_submodule(name, layer.get_base_layer())
    return len(found)

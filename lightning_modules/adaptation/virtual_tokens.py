"""Virtual tokens: P positions in front of every sequence that hold trained vectors instead of
text — the mechanism behind prompt tuning (the vectors are input embeddings) and prefix tuning
(the vectors are every layer's keys and values).

One mechanism for every backbone (ptmlab's own Transformers and Hugging Face checkpoints), with
forward hooks, so the backbone's code, its state-dict names and its exports stay as they are:

1. a pre-hook on the backbone prepends P placeholder ids to `input_ids`, ones to
   `attention_mask` (the prefix is attended to) and zeros to `token_type_ids`; padding stays
   masked, and positions follow on from the prefix (as with Hugging Face's past key values;
   `position_ids` a caller passes are shifted by P and the prefix's prepended);
2. the subclass's hooks put the trained vectors at those P positions (the word-embedding output,
   or each layer's key and value projections);
3. a hook on the backbone's output drops the P positions from every hidden state (and attention
   map), so pooling, `pool_index` and the heads see the text positions only: the prefix is
   attended to, never predicted.

The vectors live in the task model (`model.virtual_tokens`), so they are saved with it; loading
calls `insert_modules`, which attaches the hooks again.
"""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.models.base import BackboneOutput
from ptmlab.contracts import ConfigError

PLACEHOLDER_ID = 0  # any valid id: the subclass overwrites what those positions carry


def max_positions(backbone: nn.Module) -> int | None:
    """The longest sequence the backbone's position embeddings cover (None: unbounded)."""
    embeddings = getattr(backbone, "embeddings", None)
    if embeddings is not None and getattr(embeddings, "position_embeddings", None) is None:
        return None  # no position table (T5's relative positions): any length
    value = getattr(backbone, "max_position_embeddings", None)
    config = getattr(backbone, "config", None)
    if value is None and config is not None:
        value = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    return int(value) if value else None


class VirtualTokens(nn.Module):
    """Base class: P virtual positions; subclasses add the vectors and `attach_vectors`."""

    # the forward's per-token arguments after input_ids, in positional order, and what the prefix holds there
    token_args = (("attention_mask", 1), ("token_type_ids", 0))

    def __init__(self, num_tokens: int):
        super().__init__()
        if int(num_tokens) <= 0:
            raise ConfigError(f"adaptation.num_tokens={num_tokens} must be a positive integer")
        self.num_tokens = int(num_tokens)

    def check_length(self, backbone: nn.Module, max_length: int, key: str = "task.max_length") -> None:
        limit = max_positions(backbone)
        if limit is not None and self.num_tokens + int(max_length) > limit:
            raise ConfigError(
                f"adaptation.num_tokens={self.num_tokens} + {key}={max_length} = "
                f"{self.num_tokens + int(max_length)} exceeds the {limit} positions of "
                f"{type(backbone).__name__}: shorten one of them"
            )

    def install(self, model: nn.Module, max_length: int | None) -> None:
        """Into a task model: checked against the longest input (when known), kept as
        `model.virtual_tokens` (saved with it), hooked onto its backbone."""
        if max_length is not None:
            self.check_length(model.backbone, max_length)
        model.virtual_tokens = self
        self.attach(model.backbone)

    def attach(self, backbone: nn.Module) -> None:
        backbone.register_forward_pre_hook(self._prepend, with_kwargs=True)
        backbone.register_forward_hook(self._strip)
        self.attach_vectors(backbone)

    def attach_vectors(self, backbone: nn.Module) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- hooks -------------------------------------------------------------------------------
    def _prepend(self, module, args, kwargs):
        args = list(args)
        input_ids = args[0] if args else kwargs["input_ids"]
        b, p = input_ids.shape[0], self.num_tokens
        placeholder = torch.full((b, p), PLACEHOLDER_ID, dtype=input_ids.dtype, device=input_ids.device)
        input_ids = torch.cat([placeholder, input_ids], dim=1)  # B×T -> B×(P+T)
        if args:
            args[0] = input_ids
        else:
            kwargs["input_ids"] = input_ids
        for position, (name, fill) in enumerate(self.token_args, start=1):
            in_args = len(args) > position
            value = args[position] if in_args else kwargs.get(name)
            if value is None:
                if name == "attention_mask":  # without a mask every text position is real
                    value = torch.ones_like(input_ids[:, p:])
                else:
                    continue
            value = torch.cat([torch.full((b, p), fill, dtype=value.dtype, device=value.device), value], dim=1)
            if in_args:
                args[position] = value
            else:
                kwargs[name] = value
        if kwargs.get("position_ids") is not None:  # the prefix at 0..P-1, the text after it
            positions = kwargs["position_ids"]
            ahead = torch.arange(p, dtype=positions.dtype, device=positions.device).expand(b, p)
            kwargs["position_ids"] = torch.cat([ahead, positions + p], dim=1)  # B×T -> B×(P+T)
        return tuple(args), kwargs

    def _strip(self, module, args, output: BackboneOutput) -> BackboneOutput:
        p = self.num_tokens
        hidden = tuple(h[:, p:] for h in output.hidden_states)  # B×(P+T)×H -> B×T×H
        attentions = None
        if output.attentions is not None:
            attentions = tuple(a[:, :, p:, p:] for a in output.attentions)  # text queries × text keys
        return BackboneOutput(hidden_states=hidden, attentions=attentions)


class SoftPrompt(VirtualTokens):
    """Prompt tuning (Lester et al. 2021): P trained input-embedding vectors."""

    def __init__(self, num_tokens: int, embedding_size: int):
        super().__init__(num_tokens)
        self.embeddings = nn.Parameter(torch.zeros(self.num_tokens, int(embedding_size)))

    def attach_vectors(self, backbone: nn.Module) -> None:
        backbone.get_input_embeddings().register_forward_hook(self._replace_embeddings)

    def _replace_embeddings(self, module, args, output: torch.Tensor) -> torch.Tensor:
        prompt = self.embeddings.to(output.dtype).unsqueeze(0).expand(output.shape[0], -1, -1)  # P×E -> B×P×E
        return torch.cat([prompt, output[:, self.num_tokens :]], dim=1)


# (key, value) projection names inside one attention layer, by naming scheme: ptmlab's own and
# Hugging Face BERT-family (`key`/`value`), Llama/OPT/BART-style (`k_proj`/`v_proj`).
KEY_VALUE_NAMES = (("key", "value"), ("k_proj", "v_proj"))


def key_value_projections(backbone: nn.Module) -> list[tuple[nn.Linear, nn.Linear]]:
    """Each layer's (key, value) Linear projections, bottom to top."""
    layers = backbone.layer_modules()
    if len({id(layer) for layer in layers}) != len(layers):
        raise ConfigError(
            f"adaptation=prefix_tuning: {type(backbone).__name__} shares one layer across "
            f"the stack (ALBERT), so a prefix per layer has nowhere to live"
        )
    pairs = []
    for layer in layers:
        modules = dict(layer.named_modules())
        found = None
        for key_name, value_name in KEY_VALUE_NAMES:
            keys = [m for n, m in modules.items() if n.rsplit(".", 1)[-1] == key_name and isinstance(m, nn.Linear)]
            values = [m for n, m in modules.items() if n.rsplit(".", 1)[-1] == value_name and isinstance(m, nn.Linear)]
            if len(keys) == 1 and len(values) == 1:
                found = (keys[0], values[0])
                break
        if found is None:
            raise ConfigError(
                f"adaptation=prefix_tuning needs separate key and value projections "
                f"({' or '.join('/'.join(p) for p in KEY_VALUE_NAMES)}) in {type(layer).__name__}; "
                f"fused projections (GPT-2's c_attn) are not supported"
            )
        pairs.append(found)
    return pairs


class Prefix(VirtualTokens):
    """Prefix tuning / P-tuning v2: P trained key and value vectors at every layer, written over the
    key and value projections' outputs at the virtual positions, so every text token attends to
    them while what the virtual positions' hidden states hold never matters. Optionally produced
    by a reparameterisation MLP (Li & Liang 2021) from P embeddings while training."""

    def __init__(self, num_tokens: int, num_layers: int, kv_size: int, reparameterize: bool = False, hidden: int = 512):
        super().__init__(num_tokens)
        self.num_layers, self.kv_size = int(num_layers), int(kv_size)
        shape = (self.num_layers, 2, self.num_tokens, self.kv_size)  # L × (key, value) × P × H
        self.prefix = nn.Parameter(torch.randn(shape) * 0.02)
        self.mlp = None
        if reparameterize:
            self.seed = nn.Parameter(torch.randn(self.num_tokens, self.kv_size) * 0.02)
            self.mlp = nn.Sequential(
                nn.Linear(self.kv_size, int(hidden)),
                nn.Tanh(),
                nn.Linear(int(hidden), self.num_layers * 2 * self.kv_size),
            )

    def vectors(self) -> torch.Tensor:
        """L×2×P×H key/value prefixes."""
        if self.mlp is None:
            return self.prefix
        out = self.mlp(self.seed)  # P×(L·2·H)
        return out.view(self.num_tokens, self.num_layers, 2, self.kv_size).permute(1, 2, 0, 3)  # -> L×2×P×H

    @torch.no_grad()
    def fold_reparameterization(self) -> None:
        """Stores the MLP's output as the prefix and drops the MLP (after training): what is kept
        per task is the prefix itself, as Li & Liang do."""
        if self.mlp is not None:
            self.prefix.copy_(self.vectors())
            self.mlp, self.seed = None, None

    def key_value_pairs(self, backbone: nn.Module) -> list[tuple[nn.Linear, nn.Linear]]:
        return key_value_projections(backbone)

    def attach_vectors(self, backbone: nn.Module) -> None:
        pairs = self.key_value_pairs(backbone)
        if len(pairs) != self.num_layers:
            raise ConfigError(f"prefix for {self.num_layers} layers, backbone has {len(pairs)}")
        for index, (key, value) in enumerate(pairs):
            key.register_forward_hook(self._writer(index, 0))
            value.register_forward_hook(self._writer(index, 1))

    def _writer(self, layer: int, which: int):
        def write(module, args, output: torch.Tensor) -> torch.Tensor:
            prefix = self.vectors()[layer, which].to(output.dtype)  # P×H
            prefix = prefix.unsqueeze(0).expand(output.shape[0], -1, -1)  # -> B×P×H
            return torch.cat([prefix, output[:, self.num_tokens :]], dim=1)

        return write


def refuse_on_generator(backbone: nn.Module, mode: str, encoder_decoder_ok: bool, hf_ok: bool = False) -> None:
    """Virtual tokens under `task.kind: generation` work where ptmlab's own forward computes the
    logits and the positions are free: a GPT decoder, and (prefix tuning only) an encoder–decoder
    and, through peft, a Hugging Face LM. ConfigError naming the key for the rest, before anything trains."""
    if backbone.hf_native and hf_ok:
        return
    if backbone.hf_native:
        raise ConfigError(
            f"adaptation={mode} does not apply to a Hugging Face checkpoint under task.kind=generation "
            f"(its LM computes the logits past the virtual-token hooks); use adaptation=lora or bitfit"
        )
    if backbone.family == "encoder_decoder" and not encoder_decoder_ok:
        raise ConfigError(
            f"adaptation={mode} does not apply to an encoder-decoder under task.kind=generation (the "
            f"token table it writes into feeds the decoder too); use adaptation=prefix_tuning"
        )
    if not backbone.is_causal and backbone.family != "encoder_decoder":
        raise ConfigError(
            f"adaptation={mode} does not apply to UniLM's seq2seq generation ({type(backbone).__name__}: "
            f"its attention mask is built for the text positions); use adaptation=lora, bitfit or full"
        )

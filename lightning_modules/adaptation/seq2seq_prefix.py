"""Prefix tuning on an encoder–decoder (Li & Liang 2021 §4.2, for BART; here ptmlab's T5 and BART
presets, models/encoder_decoder.py): P trained keys and values in front of every encoder layer's
self-attention and P more in front of every decoder layer's self-attention. Each side carries its
own `Prefix` (adaptation/virtual_tokens.py), hooked on that side's module: the encoder's P
positions are stripped from its states before the decoder's cross-attention reads them, the
decoder's from its states before the LM head. Cross-attention keeps its own keys and values (they
are the encoder's text positions).

    model.virtual_tokens    Seq2SeqPrefix: .encoder (Prefix), .decoder (DecoderPrefix)
"""

from __future__ import annotations

from torch import nn

from lightning_modules.adaptation.virtual_tokens import Prefix, key_value_projections


def self_attention_projections(decoder: nn.Module) -> list[tuple[nn.Linear, nn.Linear]]:
    """Each decoder layer's self-attention (key, value), bottom to top (not its cross-attention's)."""
    return [(layer.attention.key, layer.attention.value) for layer in decoder.layer_modules()]


class DecoderPrefix(Prefix):
    """A prefix on a decoder side (`Seq2SeqDecoder.forward(input_ids, attention_mask,
    encoder_hidden_states, ...)` -> (hidden states, self-attentions, cross-attentions)): its own
    self-attention's keys and values only, never the cross-attention's."""

    token_args = (("attention_mask", 1),)  # the next positional argument is the encoder's states

    def key_value_pairs(self, backbone: nn.Module) -> list[tuple[nn.Linear, nn.Linear]]:
        return self_attention_projections(backbone)

    def _strip(self, module, args, output):
        p = self.num_tokens
        states, self_probs, cross_probs = output
        states = [h[:, p:] for h in states]  # B×(P+T)×H -> B×T×H
        if self_probs is not None:
            self_probs = [a[:, :, p:, p:] for a in self_probs]  # text queries × text keys
            cross_probs = [a[:, :, p:] for a in cross_probs]  # text queries × source keys
        return states, self_probs, cross_probs


class Seq2SeqPrefix(nn.Module):
    def __init__(
        self, num_tokens: int, encoder: nn.Module, decoder: nn.Module, reparameterize: bool = False, hidden: int = 512
    ):
        super().__init__()
        sides = {}
        for name, kind, pairs in (
            ("encoder", Prefix, key_value_projections(encoder)),
            ("decoder", DecoderPrefix, self_attention_projections(decoder)),
        ):
            sides[name] = kind(
                num_tokens, len(pairs), pairs[0][0].out_features, reparameterize=reparameterize, hidden=hidden
            )
        self.encoder, self.decoder = sides["encoder"], sides["decoder"]
        self.num_tokens = int(num_tokens)

    def install(self, model: nn.Module, max_length: int | None, max_target_length: int | None) -> None:
        backbone = model.backbone
        for prefix, side, longest, key in (
            (self.encoder, backbone.encoder, max_length, "task.max_length"),
            (self.decoder, backbone.decoder, max_target_length, "task.max_target_length"),
        ):
            if longest is not None:
                prefix.check_length(side, longest, key)
            prefix.attach(side)
        model.virtual_tokens = self

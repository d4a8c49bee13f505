"""ELMo-style bidirectional LSTM language model (Peters et al. 2018), `family: lstm`.

Two separate L-layer LSTM stacks over the same token representation: a forward one reading left
to right and a backward one reading right to left (no parameters shared between directions, as
ELMo; only the token embeddings and whatever softmax the objective ties to them are shared).

    x      = token embedding (E), projected to the LSTM output width D when E != D
    f_l    = forward LSTM layer l   over f_{l-1} (f_0 = x)      (+ f_{l-1} when residual, l >= 2)
    b_l    = backward LSTM layer l  over b_{l-1} (b_0 = x), run on the reversed sequence

Hidden states for the scalar mix (all B×T×2D, `hidden_size` = 2D):
    (  [x; x],  [f_1; b_1],  ...,  [f_L; b_L]  )
ELMo's layer 0 is the context-independent token representation duplicated to the width of the
biLSTM layers, so all L+1 layers mix with one set of weights.

An LSTM layer with `projection_size` is ELMo's LSTMP (cell of `hidden_size`, output projected to
`projection_size` = D); without it D = `hidden_size`.

The bidirectional LM objective needs the directions apart: `LSTMOutput.forward_states[l]` (f_l)
at t predicts token t+1, `LSTMOutput.backward_states[l]` (b_l) at t predicts token t-1; neither
has seen the token it predicts. Padding must be on the right (the backward LSTM reverses each
sequence within its own length); a left-padded mask is refused.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn

from lightning_modules.models.base import Backbone, BackboneOutput
from ptmlab.contracts import ConfigError
from ptmlab.methods.models import BidirectionalLSTMLMParams


@dataclass
class LSTMOutput(BackboneOutput):
    forward_states: tuple[torch.Tensor, ...] = ()  # L+1 × (B, T, D): x, f_1, ..., f_L
    backward_states: tuple[torch.Tensor, ...] = ()  # L+1 × (B, T, D): x, b_1, ..., b_L


def reverse_within_length(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each sequence of x (B×T×...) within its first lengths[b] positions; padding stays
    in place at the end. Applying it twice is the identity."""
    seq_len = x.shape[1]
    positions = torch.arange(seq_len, device=x.device).unsqueeze(0)  # 1×T
    lengths = lengths.unsqueeze(1)  # B -> B×1
    index = torch.where(positions < lengths, lengths - 1 - positions, positions)  # B×T
    index = index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class DirectionalLSTMStack(nn.Module):
    """L single-layer LSTMs applied in turn (separate modules so residual connections and
    per-layer outputs are explicit), reading left to right."""

    def __init__(
        self, input_size: int, hidden_size: int, projection_size: int, num_layers: int, dropout: float, residual: bool
    ):
        super().__init__()
        output_size = projection_size or hidden_size
        self.layers = nn.ModuleList(
            nn.LSTM(
                input_size if i == 0 else output_size,
                hidden_size,
                num_layers=1,
                batch_first=True,
                proj_size=projection_size,
            )
            for i in range(num_layers)
        )
        self.dropout = nn.Dropout(dropout)
        self.residual = residual

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        outputs = []
        for i, lstm in enumerate(self.layers):
            with warnings.catch_warnings():
                # On CPU, LSTMP falls back from oneDNN to the reference kernel and says so every call.
                warnings.filterwarnings("ignore", message="LSTM with projections is not supported with oneDNN")
                y, _ = lstm(x)
            if self.residual and i > 0:  # ELMo: residual connection between LSTM layers
                y = y + x
            outputs.append(y)
            x = self.dropout(y)
        return outputs


class BidirectionalLSTMLM(Backbone):
    declaration = BidirectionalLSTMLMParams

    family = "lstm"
    is_causal = False  # the concatenated states see both sides; each direction alone is causal
    has_attention = False

    def __init__(
        self,
        vocab_size: int,
        embedding_size: int = 128,
        hidden_size: int = 256,
        projection_size: int | None = None,
        num_layers: int = 2,
        dropout: float = 0.1,
        residual: bool = True,
        initializer_range: float = 0.1,
    ):
        super().__init__()
        for key, value in {
            "vocab_size": vocab_size,
            "embedding_size": embedding_size,
            "hidden_size": hidden_size,
            "num_layers": num_layers,
        }.items():
            if int(value) <= 0:
                raise ConfigError(f"model.backbone.{key}={value} must be a positive integer")
        projection_size = int(projection_size or 0)
        if projection_size < 0 or projection_size >= int(hidden_size):
            raise ConfigError(
                f"model.backbone.projection_size={projection_size} must be smaller than "
                f"model.backbone.hidden_size={hidden_size} (or null for no projection)"
            )
        self.vocab_size, self.embedding_size = int(vocab_size), int(embedding_size)
        self.lstm_hidden_size, self.projection_size = int(hidden_size), projection_size
        self.num_layers = int(num_layers)
        self.output_size = projection_size or self.lstm_hidden_size  # D, per direction
        self.hidden_size = 2 * self.output_size  # the width of every returned layer

        self.word_embeddings = nn.Embedding(self.vocab_size, self.embedding_size)
        nn.init.normal_(self.word_embeddings.weight, std=initializer_range)
        self.embedding_projection = (
            nn.Linear(self.embedding_size, self.output_size) if self.embedding_size != self.output_size else None
        )
        self.embedding_dropout = nn.Dropout(dropout)
        stack_args = (self.output_size, self.lstm_hidden_size, projection_size, self.num_layers, dropout, residual)
        self.forward_lstm = DirectionalLSTMStack(*stack_args)
        self.backward_lstm = DirectionalLSTMStack(*stack_args)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.word_embeddings

    def token_representation(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The context-independent layer: B×T -> B×T×D."""
        x = self.word_embeddings(input_ids)
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)  # B×T×E -> B×T×D
        return x

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> LSTMOutput:
        batch, seq_len = input_ids.shape
        if attention_mask is None:
            lengths = torch.full((batch,), seq_len, dtype=torch.long, device=input_ids.device)
        else:
            mask = attention_mask.bool()
            lengths = mask.sum(dim=1)
            right_padded = torch.arange(seq_len, device=mask.device)[None, :] < lengths[:, None]
            if not torch.equal(mask, right_padded):
                raise ValueError("BidirectionalLSTMLM needs right padding: attention_mask must be 1s then 0s per row")
        x = self.token_representation(input_ids)
        dropped = self.embedding_dropout(x)
        forward_states = self.forward_lstm(dropped)
        # Reverse within each length so the backward LSTM starts at the last real token.
        backward_states = [
            reverse_within_length(b, lengths) for b in self.backward_lstm(reverse_within_length(dropped, lengths))
        ]
        forward_all, backward_all = (x, *forward_states), (x, *backward_states)
        hidden_states = tuple(
            torch.cat([f, b], dim=-1) for f, b in zip(forward_all, backward_all)
        )  # 2 × B×T×D -> B×T×2D
        return LSTMOutput(
            hidden_states=hidden_states, attentions=None, forward_states=forward_all, backward_states=backward_all
        )

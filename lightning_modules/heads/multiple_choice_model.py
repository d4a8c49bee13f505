"""The task model of `task.kind: multiple_choice`: one score per (context, choice) sequence, the
scores of an example's choices side by side (B×N), trained with cross-entropy over its choices
(softmax over choices; heads/evaluation.py `task_loss`).

    scoring=head            the pooled state of each sequence (stage.pooling) -> dropout + linear
                            -> one score: Hugging Face's `*ForMultipleChoice`, any backbone
    scoring=log_likelihood  a causal decoder's summed log-probability of the choice's tokens given
                            the context, its next-token logits tied to the input embeddings (as GPT
                            and CLM pre-training, objectives/clm.py): lm-evaluation-harness's
                            `loglikelihood`. Zero-shot (adaptation=zero_shot) it is lm-eval's score;
                            fine-tuned, the cross-entropy over the choices' log-likelihoods trains
                            the decoder itself. `head` is a dropout with no weights, so the
                            task-model export saves and reloads it like any single-head model.

A choice an example does not have (fewer choices than its split's widest row) scores -inf.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.heads.pooling import SingleHeadModel, linear_head
from lightning_modules.tasks.choice_encoding import SCORINGS, ChoiceEncoder
from ptmlab.contracts import ConfigError


def choice_grid(scores: torch.Tensor, choice_mask: torch.Tensor) -> torch.Tensor:
    """S scores, one per sequence in example order -> B×N, -inf where an example has no choice n."""
    grid = torch.full(choice_mask.shape, float("-inf"), dtype=scores.dtype, device=scores.device)
    return grid.masked_scatter(choice_mask, scores)


def summed_log_likelihood(logits: torch.Tensor, input_ids: torch.Tensor, target_mask: torch.Tensor) -> torch.Tensor:
    """S×T×V next-token logits -> S: the sum over target positions t of log p(token t | tokens < t)."""
    log_probs = logits[:, :-1].float().log_softmax(-1)  # position t-1 predicts token t
    picked = log_probs.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # S×(T-1)
    return (picked * target_mask[:, 1:].to(picked.dtype)).sum(-1)


class MultipleChoiceModel(SingleHeadModel):
    def __init__(
        self,
        backbone: nn.Module,
        scoring: str = "head",
        pooling: str = "pool_index",
        head_dropout: float = 0.1,
        scalar_mix: bool = False,
        task_name: str | None = None,
    ):
        if scoring not in SCORINGS:
            raise ConfigError(f"task.choice_scoring={scoring} is unknown; valid: {', '.join(SCORINGS)}")
        if scoring == "log_likelihood":
            _check_tied_decoder(backbone)
            if scalar_mix:
                raise ConfigError(
                    "task.choice_scoring=log_likelihood reads the decoder's next-token logits (its top "
                    "layer); a scalar-mix (feature-based) adaptation does not apply"
                )
            pooling = "tokens"
        elif pooling not in ("pool_index", "mean"):
            raise ConfigError(
                f"task.kind=multiple_choice scores each (context, choice) sequence from one vector: "
                f"stage.pooling must be pool_index or mean, not {pooling}"
            )
        super().__init__(backbone, pooling=pooling, scalar_mix=scalar_mix)
        self.task_name, self.scoring = task_name, scoring
        self.head = (
            linear_head(backbone.hidden_size, 1, head_dropout)
            if scoring == "head"
            else nn.Sequential(nn.Dropout(head_dropout))
        )

    def input_encoder(self, tokenizer, max_length: int, *, doc_stride: int | None = None) -> ChoiceEncoder:
        return ChoiceEncoder(
            tokenizer, causal=bool(self.backbone.is_causal), max_length=max_length, scoring=self.scoring
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        states = self.head(self.pooled(batch))  # S×H (head) or S×T×H (log_likelihood)
        if self.scoring == "head":
            scores = states.squeeze(-1)  # S×1 -> S
        else:
            # Only the target positions' log-probabilities are kept, but the S×T×V logits are made
            # whole: selecting the positions first would sync with the host every step.
            logits = F.linear(states, self.backbone.get_input_embeddings().weight)  # S×T×H -> S×T×V
            scores = summed_log_likelihood(logits, batch["input_ids"], batch["target_mask"])
        return choice_grid(scores, batch["choice_mask"])  # B×N

    @property
    def head_sizes(self) -> dict[str, int]:
        return {self.task_name or "task": 1}


def _check_tied_decoder(backbone: nn.Module) -> None:
    """The next-token logits are the states times the input embeddings: a decoder whose LM head is
    its own (untied) matrix, or whose embeddings are narrower than its states, would be misread."""
    config = getattr(backbone, "config", None)
    if config is not None and getattr(config, "tie_word_embeddings", True) is False:
        raise ConfigError(
            f"task.choice_scoring=log_likelihood reads next-token logits from the tied input "
            f"embeddings, and {config.model_type} does not tie its LM head (tie_word_embeddings=false)"
        )
    if backbone.get_input_embeddings().weight.shape[1] != backbone.hidden_size:
        raise ConfigError(
            "task.choice_scoring=log_likelihood: this decoder's embeddings are factorised "
            "(E ≠ H); its tied next-token logits need a projection the task model does not have"
        )

"""The soft-target (KD) loss of distillation for every task kind: KL(teacher/T ‖ student/T) · T²
(Hinton et al.; the T² keeps its gradient scale independent of T) over what each head predicts.

    sentence (classification)   B×C: one distribution per example (MSE of the logits for regression)
    token classification        B×T×C: one distribution over the tags per labelled (first) sub-word
    span extraction             B×T×2: a distribution over the window's positions for the start
                                and one for the end (padding left out), the two KLs averaged
    generation                  B×T×V: word-level KD (Kim & Rush 2016), one distribution over the
                                vocabulary per target token (the labelled positions)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lightning_modules.tasks.token_encoding import IGNORE


def _kl(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean over rows of KL(softmax(teacher/T) ‖ softmax(student/T)) · T²; N×C each."""
    return (
        F.kl_div(
            F.log_softmax(student.float() / temperature, -1),
            F.softmax(teacher.float() / temperature, -1),
            reduction="batchmean",
        )
        * temperature
        * temperature
    )


def soft_target_loss(
    spec, student: torch.Tensor, teacher: torch.Tensor, batch: dict[str, torch.Tensor], temperature: float
) -> torch.Tensor:
    if spec.is_generation or spec.is_token_level:  # B×T×V or B×T×C; only the labelled positions
        kept = batch["labels"] != IGNORE  # B×T
        return _kl(student[kept], teacher[kept], temperature)  # -> N×V
    if spec.is_span_level:  # B×T×2: softmax over the positions, padding out of both distributions
        padding = ~batch["attention_mask"].bool()[..., None]  # B×T -> B×T×1
        student = student.float().masked_fill(padding, -1e4).transpose(1, 2).flatten(0, 1)  # -> 2B×T
        teacher = teacher.float().masked_fill(padding, -1e4).transpose(1, 2).flatten(0, 1)
        return _kl(student, teacher, temperature)
    if spec.is_regression:
        return F.mse_loss(student.squeeze(-1).float(), teacher.squeeze(-1).float())
    return _kl(student, teacher, temperature)

"""Token masking for masked-LM objectives: pure, seeded functions on token tensors.

Masking is two steps, so variants replace only the step they change:

    select_tokens      which positions are predicted (i.i.d. Bernoulli for BERT; whole-word and
                       span masking are other selectors returning the same B×T boolean mask)
    replace_selected   what the model sees there (BERT's 80% [MASK] / 10% random / 10% unchanged)
                       and the labels (the original token at selected positions, -100 elsewhere)

`mask_tokens` is BERT's composition of the two. Every random draw comes from the explicit
`generator`, so a seed fixes the masks and a fresh draw each call makes masking dynamic.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

IGNORE_INDEX = -100  # label value cross-entropy skips (torch's default ignore_index)


def _uniform(shape: torch.Size, generator: torch.Generator, device: torch.device) -> torch.Tensor:
    # Draw where the generator lives (a CPU generator cannot fill a CUDA tensor), then move.
    return torch.rand(shape, generator=generator, device=generator.device).to(device)


def select_tokens(special_tokens_mask: torch.Tensor, mask_prob: float, generator: torch.Generator) -> torch.Tensor:
    """B×T bool: each position not in `special_tokens_mask` (True = special or padding, never
    selected) is selected independently with probability `mask_prob`."""
    if not 0.0 <= mask_prob <= 1.0:
        raise ValueError(f"mask_prob={mask_prob} must be in [0, 1]")
    draws = _uniform(special_tokens_mask.shape, generator, special_tokens_mask.device)
    return (draws < mask_prob) & ~special_tokens_mask.bool()


def replacement_pool(
    vocab_size: int, special_token_ids: Iterable[int] = (), device: torch.device | str = "cpu"
) -> torch.Tensor:
    """The ids a "random token" replacement is drawn from: every id below vocab_size that is not
    special (a random [CLS] or [PAD] in the middle of a sentence would be a giveaway)."""
    ids = torch.arange(vocab_size, device=device)
    special = torch.tensor(
        sorted({int(i) for i in special_token_ids if i is not None and 0 <= int(i) < vocab_size}),
        dtype=torch.long,
        device=device,
    )
    pool = ids[~torch.isin(ids, special)] if special.numel() else ids
    if pool.numel() == 0:
        raise ValueError(f"no non-special token ids below vocab_size={vocab_size} to draw replacements from")
    return pool


def replace_selected(
    input_ids: torch.Tensor,
    selected: torch.Tensor,
    mask_token_id: int,
    replacement_ids: torch.Tensor,
    generator: torch.Generator,
    mask_token_prob: float = 0.8,
    random_token_prob: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(corrupted_ids, labels). At selected positions: [MASK] with probability mask_token_prob, a
    token drawn uniformly from `replacement_ids` with probability random_token_prob, otherwise the
    original token. Labels hold the original token at selected positions, IGNORE_INDEX elsewhere."""
    if mask_token_prob < 0 or random_token_prob < 0 or mask_token_prob + random_token_prob > 1.0 + 1e-9:
        raise ValueError(
            f"mask_token_prob={mask_token_prob} and random_token_prob={random_token_prob} "
            "must be non-negative and sum to at most 1"
        )
    labels = input_ids.masked_fill(~selected, IGNORE_INDEX)
    # One uniform draw per position splits the selected ones three ways in a single pass.
    split = _uniform(input_ids.shape, generator, input_ids.device)
    to_mask = selected & (split < mask_token_prob)
    to_random = selected & (split >= mask_token_prob) & (split < mask_token_prob + random_token_prob)
    pool = replacement_ids.to(input_ids.device)
    picks = torch.randint(pool.numel(), input_ids.shape, generator=generator, device=generator.device)
    random_ids = pool[picks.to(input_ids.device)]
    corrupted = input_ids.masked_fill(to_mask, mask_token_id)
    corrupted = torch.where(to_random, random_ids, corrupted)
    return corrupted, labels


def mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    vocab_size: int,
    mask_token_id: int,
    generator: torch.Generator,
    mask_prob: float = 0.15,
    mask_token_prob: float = 0.8,
    random_token_prob: float = 0.1,
    special_token_ids: Iterable[int] = (),
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking (Devlin et al. 2019): select mask_prob of the non-special positions, then
    80/10/10 [MASK]/random/unchanged. Random replacements are drawn from the ids below vocab_size
    that are not in `special_token_ids` (and never [MASK] itself).
    Returns (corrupted_ids, labels with IGNORE_INDEX at unselected positions)."""
    selected = select_tokens(special_tokens_mask, mask_prob, generator)
    pool = replacement_pool(vocab_size, [*special_token_ids, mask_token_id], device=input_ids.device)
    return replace_selected(input_ids, selected, mask_token_id, pool, generator, mask_token_prob, random_token_prob)

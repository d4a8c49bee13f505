"""Static masking (BERT's original recipe, which RoBERTa compares against dynamic masking): the
mask of an example is fixed for the whole run instead of redrawn every time it is seen.

The per-example generator is seeded from `seed` and a hash of the example's tokens, so the mask
is a pure function of (seed, example): the same in every epoch, on every data-parallel rank and
after a resume, with no index to carry through the data pipeline. BERT's `dupe_factor` (several
fixed masks per example) is not modelled: one mask per example.
"""

from __future__ import annotations

import hashlib

import torch

from lightning_modules.objectives.masking import replace_selected
from lightning_modules.objectives.mlm import MaskedLMObjective, special_tokens_mask_for
from lightning_modules.objectives.seeding import global_seed
from ptmlab.methods.objectives import MaskedLMParams


def example_seed(tokens: torch.Tensor, seed: int) -> int:
    """A 63-bit seed from the example's real tokens (padding excluded) and the run's seed."""
    digest = hashlib.blake2b(
        tokens.to("cpu", torch.int64).numpy().tobytes(), digest_size=8, key=int(seed).to_bytes(8, "little", signed=True)
    ).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


class StaticMaskedLMObjective(MaskedLMObjective):
    declaration = MaskedLMParams

    name = "mlm_static"

    def corrupt(self, batch):
        input_ids = batch["input_ids"]
        attention_mask = batch.get("attention_mask")
        special = special_tokens_mask_for(input_ids, self.special_ids, attention_mask)
        if "special_tokens_mask" in batch:
            special = special | batch["special_tokens_mask"].bool()
        seed = self.seed if self.seed is not None else global_seed()
        corrupted, labels = [], []
        for row in range(input_ids.shape[0]):
            ids = input_ids[row : row + 1]
            real = ids[:, attention_mask[row].bool()] if attention_mask is not None else ids
            generator = torch.Generator().manual_seed(example_seed(real, seed))
            selected = self.select_positions({"input_ids": ids}, special[row : row + 1], generator)
            c, lab = replace_selected(
                ids,
                selected,
                self.mask_token_id,
                self.replacement_ids,
                generator,
                self.mask_token_prob,
                self.random_token_prob,
            )
            corrupted.append(c)
            labels.append(lab)
        return torch.cat(corrupted), torch.cat(labels)

    @property
    def seed(self) -> int | None:
        return self.corruption.seed

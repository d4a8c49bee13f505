"""BAE-R (Garg & Ramakrishnan 2020), the masked-LM word replacement that BERT-Attack (Li et al.
2020) also uses: mask the word, let a masked LM propose its `max_candidates` most likely whole
words there, keep the one that lowers the gold probability most; words in the order of the drop
in the gold probability when each is deleted (TextAttack's `bae_garg_2019` ranking).

The MLM is any reference ptmlab loads as a backbone (`attack.mlm`): a ptmlab pretrain run with an
MLM objective (its head from the last checkpoint) or a Hugging Face *ForMaskedLM folder or name,
loaded as probe=lama loads one (probing/cloze.py). Anything else is refused in one line before
any example. `pos_match`: a proposal must share a WordNet part of speech with the word it replaces
where WordNet knows both (no tagger runs offline, so WordNet's parts of speech stand in for the
paper's tagger). Not applied: the paper's Universal Sentence Encoder similarity (0.936), which
cannot be loaded offline.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import OmegaConf

from lightning_modules.artifacts.backbone_reference import resolve_backbone
from lightning_modules.attacks.recipe import AttackRecipe
from lightning_modules.attacks.victim import Victim
from lightning_modules.attacks.wordnet import load_wordnet
from lightning_modules.probing.cloze import MaskedLM, load_masked_lm
from ptmlab.contracts import BackboneError, ConfigError
from ptmlab.methods.attacks import BAEParams


def load_attack_mlm(ref: str) -> MaskedLM:
    """The masked LM `attack.mlm` names; ConfigError in one line when it is none."""
    cfg = OmegaConf.create({"backbone": ref})
    try:
        resolved = resolve_backbone(cfg, tracking_uri="")
        return load_masked_lm(resolved, cfg)
    except (BackboneError, ConfigError, OSError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(
            f"attack.mlm={ref}: not a masked LM that loads ({why}); bae needs a ptmlab pretrain run "
            f"with an MLM objective or a Hugging Face *ForMaskedLM model"
        ) from None


class BAE(AttackRecipe):
    declaration = BAEParams
    params: BAEParams  # the validated declaration (AttackRecipe.__init__)

    name = "bae"

    def __init__(self, params: BAEParams | None = None, **values: Any):
        super().__init__(params, **values)
        self._lm: MaskedLM | None = None

    def prepare(self, victim: Victim) -> None:
        self._lm = load_attack_mlm(self.params.mlm)  # required and non-empty: the declaration says so
        if self.params.pos_match:
            load_wordnet()

    def rank(self, victim: Victim, words, gold, p_gold, indices, rng) -> list[int]:
        drops = self.leave_one_out(victim, words, gold, p_gold, indices, None)
        return [indices[k] for k in sorted(range(len(indices)), key=lambda k: (-float(drops[k]), indices[k]))]

    @torch.no_grad()
    def proposals(self, words: list[str], i: int) -> list[str]:
        """The MLM's most likely whole words at position i, best first."""
        tokenizer = self._lm.tokenizer
        text = " ".join(words[:i] + [tokenizer.mask_token] + words[i + 1 :])
        enc = tokenizer([text], return_tensors="pt")
        position = (enc["input_ids"][0] == tokenizer.mask_token_id).nonzero()
        if len(position) != 1:
            return []
        row = self._lm.logits(enc["input_ids"], enc["attention_mask"])[0, int(position[0])]
        top = torch.topk(row, min(len(row), 4 * self.params.max_candidates)).indices.tolist()
        out = []
        for token in tokenizer.convert_ids_to_tokens(top):
            if token is None:  # an id of the LM head past the tokenizer's vocabulary
                continue
            word = token.lstrip("Ġ▁")  # byte-level BPE and SentencePiece word starts
            if word.isalpha() and not token.startswith("##") and token not in tokenizer.all_special_tokens:
                out.append(word)
            if len(out) == self.params.max_candidates:
                break
        return out

    def candidates(self, words, i, rng) -> list[str]:
        original = words[i]
        found = [w for w in self.proposals(words, i) if w.lower() != original.lower()]
        if not self.params.pos_match:
            return found
        wordnet = load_wordnet()
        tags = wordnet.parts_of_speech(original)
        if not tags:
            return found
        return [w for w in found if not (pos := wordnet.parts_of_speech(w)) or pos & tags]

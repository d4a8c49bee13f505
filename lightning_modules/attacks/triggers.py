"""Universal adversarial triggers (Wallace et al. 2019): one short token sequence that, put in front
of (`position: prepend`) or after (`append`) every input, makes the model misclassify as many of
them as it can. A universal recipe: the trigger is searched once on the sample's correctly
classified examples (`search`), then each example is attacked by adding it (`attack`, one query).

The search, as the authors' code (github.com/Eric-Wallace/universal-triggers, sst.py, attacks.py
`hotflip_attack`, utils.py `get_best_candidates`) does it for SST-2:

    trigger ← `trigger_length` × `init_token` ("the the the")
    repeat `iterations` times:
      g_j   = mean over the examples of ∂ CE(gold) / ∂ e(trigger token j)       (L×E)
      cands_j = the `num_candidates` tokens v with the largest e_v · g_j            HotFlip's first-order
              (the loss rises fastest along g: untargeted, the true label's loss increased)
      beam search left to right: position 0's candidates (and the current token) each scored by the
      mean CE over the examples, the `beam_size` best kept; each beam extended at position 1, ... .
      stop when the best trigger is the current one (no candidate raises the loss)

Tokens are whole words of the source's vocabulary (letters only, not special, and encoded back to
themselves alone), so a trigger is text that any caller can add to a sentence. Where a trigger's
tokens sit in an encoded input is found by encoding the sentences once more with a contrast
trigger (another token in every slot): the positions that differ. Nothing is random: the search
is deterministic for a given model and sample.

The per-example record's `perturbed` is the sentence with the trigger and `changed_indices` the
trigger's words; its perturbed-word ratio counts the trigger's words over the words of the
perturbed sentence. An example costs 2 queries (its clean prediction and the one with the
trigger); the search's own queries are in the summary (`trigger_search.queries`).
"""

from __future__ import annotations

from typing import Any

import torch

from lightning_modules.attacks.recipe import FAILED, SUCCEEDED, AttackRecipe
from lightning_modules.attacks.victim import Victim
from ptmlab.contracts import ConfigError
from ptmlab.methods.attacks import UniversalTriggersParams


def hotflip_candidates(gradient: torch.Tensor, embeddings: torch.Tensor, allowed: torch.Tensor, k: int) -> torch.Tensor:
    """L×k token ids: per trigger position the k tokens whose embedding has the largest dot product
    with the position's gradient (the first-order rise of the loss when the token is swapped in,
    up to the current token's own term, the same for every candidate). `allowed` (V, bool) masks
    the vocabulary; ties go to the lower id."""
    scores = gradient.float() @ embeddings.float().T  # L×E · E×V -> L×V
    scores = scores.masked_fill(~allowed, float("-inf"))
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    return order[:, : min(k, int(allowed.sum()))]


def beam_search(
    trigger: tuple[int, ...], candidates: list[list[int]], score, beam_size: int
) -> tuple[tuple[int, ...], float]:
    """The authors' `get_best_candidates`: position 0's candidates and the unchanged trigger
    scored, the `beam_size` best kept, each extended at position 1, and so on; the best at the
    end (ties: the earlier scored, so the unchanged trigger wins a tie). `score(trigger) -> loss`."""
    beams = [(trigger, score(trigger))]
    for j in range(len(trigger)):
        scored = []
        for beam, loss in beams:
            scored.append((beam, loss))
            for token in candidates[j]:
                if token != beam[j]:
                    swapped = beam[:j] + (int(token),) + beam[j + 1 :]
                    scored.append((swapped, score(swapped)))
        beams = sorted(scored, key=lambda item: -item[1])[:beam_size]  # stable: the earlier wins a tie
    return beams[0]


class UniversalTriggers(AttackRecipe):
    declaration = UniversalTriggersParams
    params: UniversalTriggersParams  # the validated declaration (AttackRecipe.__init__)

    name = "triggers"

    def __init__(self, params: UniversalTriggersParams | None = None, **values: Any):
        super().__init__(params, **values)
        self._words: list[str] = []  # token id -> its word ("" where the token is not a whole word)
        self._allowed: torch.Tensor | None = None
        self._trigger: tuple[int, ...] = ()
        self._report: dict = {}

    # -- the vocabulary --------------------------------------------------------------------------

    def prepare(self, victim: Victim) -> None:
        """The whole-word tokens a trigger may use; the initial trigger, checked to encode in place."""
        if any(op.get("op") == "quantize" for op in victim.loaded.manifest.get("compression") or ()):
            # quantized layers have no autograd kernel: no gradient reaches the embeddings
            raise ConfigError(
                "attack=triggers: the source is an int8 model, whose quantized layers give no "
                "gradients; attack its float source with triggers, or this model with deepwordbug/pwws"
            )
        tokenizer = victim.loaded.tokenizer
        size = int(victim.embedding_matrix().shape[0])
        special = set(tokenizer.all_special_ids)
        words = [""] * size
        pieces = [
            (i, t)
            for i, t in enumerate(tokenizer.convert_ids_to_tokens(list(range(min(size, len(tokenizer))))))
            if t is not None and t.isalpha() and i not in special
        ]
        encoded = tokenizer([t for _, t in pieces], add_special_tokens=False)["input_ids"] if pieces else []
        for (i, token), ids in zip(pieces, encoded):
            if ids == [i]:
                words[i] = token
        self._words = words
        self._allowed = torch.tensor([bool(w) for w in words])
        if int(self._allowed.sum()) < 2:
            raise ConfigError(
                "attack=triggers: the source's vocabulary has fewer than two whole-word tokens to build a trigger from"
            )
        ids = tokenizer(self.params.init_token, add_special_tokens=False)["input_ids"]
        if len(ids) != 1 or not words[ids[0]]:
            raise ConfigError(
                f"attack.init_token={self.params.init_token}: not a whole-word token of the source's vocabulary"
            )
        self._trigger = (ids[0],) * self.params.trigger_length
        victim.start(("the",), None)  # a one-text probe: how the tokenizer encodes a trigger in place
        probe = self.slots(victim, [["the"]], self._trigger)[0]
        if len(probe) != self.params.trigger_length:
            raise ConfigError(
                f"attack=triggers: the source's tokenizer does not encode a trigger's words one token "
                f"each in place ({len(probe)} of {self.params.trigger_length} found)"
            )

    def text(self, trigger: tuple[int, ...]) -> list[str]:
        return [self._words[t] for t in trigger]

    def with_trigger(self, words: list[str], trigger: tuple[int, ...]) -> list[str]:
        return self.text(trigger) + words if self.params.position == "prepend" else words + self.text(trigger)

    def contrast(self, trigger: tuple[int, ...]) -> tuple[int, ...]:
        """Another whole-word token in every slot (the lowest allowed id that differs)."""
        allowed = self._allowed.nonzero().flatten().tolist()
        return tuple(next(a for a in allowed if a != t) for t in trigger)

    def slots(
        self,
        victim: Victim,
        sentences: list[list[str]],
        trigger: tuple[int, ...],
        contexts: list[tuple[str, ...]] | None = None,
    ) -> list[list[int]]:
        """Per sentence (of its example in `contexts`), the token positions of the trigger's slots
        0, 1, ... (fewer where the encoder's truncation cut the trigger off): where its encoding
        differs from the contrast's."""
        ours = victim.token_ids([self.with_trigger(w, trigger) for w in sentences], contexts)
        theirs = victim.token_ids([self.with_trigger(w, self.contrast(trigger)) for w in sentences], contexts)
        out = []
        for a, b in zip(ours, theirs):
            if a.shape != b.shape:
                raise ConfigError(
                    "attack=triggers: the source's tokenizer splits a trigger's word into several tokens in context"
                )
            positions = (a != b).nonzero().flatten().tolist()
            if [int(a[p]) for p in positions] != list(trigger[: len(positions)]):
                raise ConfigError(
                    "attack=triggers: the source's tokenizer does not encode the trigger's words as the tokens searched"
                )
            out.append(positions)
        return out

    # -- the search ------------------------------------------------------------------------------

    def average_gradient(
        self,
        victim: Victim,
        sentences: list[list[str]],
        golds: list[int],
        contexts: list[tuple[str, ...]] | None = None,
    ) -> torch.Tensor:
        """L×E: the gold loss's gradient at each trigger slot, averaged over the sentences that hold it."""
        grads = victim.embedding_gradients([self.with_trigger(w, self._trigger) for w in sentences], golds, contexts)
        total = torch.zeros(self.params.trigger_length, grads[0].shape[1])
        counts = torch.zeros(self.params.trigger_length, 1)
        for grad, positions in zip(grads, self.slots(victim, sentences, self._trigger, contexts)):
            total[: len(positions)] += grad[positions]
            counts[: len(positions)] += 1
        return total / counts.clamp(min=1)

    def search(self, victim: Victim, examples: list[tuple[tuple[str, ...], int]]) -> None:
        sentences, golds, contexts = [], [], []
        for texts, gold in examples:
            sentences.append(victim.start(texts, None))  # each example's attacked words
            golds.append(int(gold))
            contexts.append(tuple(texts))
        victim.queries = 0
        trigger, history = self._trigger, []
        if sentences:
            embeddings = victim.embedding_matrix()
            cache: dict[tuple[int, ...], tuple[float, float]] = {}

            def evaluate(candidate: tuple[int, ...]) -> tuple[float, float]:
                """(mean gold loss, accuracy) over the examples with `candidate` added, each trigger scored once."""
                if candidate not in cache:
                    losses, predicted = victim.gold_losses(
                        [self.with_trigger(w, candidate) for w in sentences], golds, contexts
                    )
                    cache[candidate] = (float(losses.mean()), float((predicted == torch.tensor(golds)).float().mean()))
                return cache[candidate]

            loss, accuracy = evaluate(trigger)
            history.append(
                {
                    "iteration": 0,
                    "trigger": " ".join(self.text(trigger)),
                    "loss": round(loss, 6),
                    "accuracy": round(accuracy, 6),
                }
            )
            for iteration in range(1, self.params.iterations + 1):
                self._trigger = trigger
                gradient = self.average_gradient(victim, sentences, golds, contexts)
                candidates = hotflip_candidates(
                    gradient, embeddings, self._allowed, self.params.num_candidates
                ).tolist()
                best, loss = beam_search(trigger, candidates, lambda t: evaluate(t)[0], self.params.beam_size)
                if best == trigger:
                    break  # no candidate raises the loss
                trigger = best
                history.append(
                    {
                        "iteration": iteration,
                        "trigger": " ".join(self.text(trigger)),
                        "loss": round(loss, 6),
                        "accuracy": round(evaluate(trigger)[1], 6),
                    }
                )
        self._trigger = trigger
        self._report = {
            "trigger": " ".join(self.text(trigger)),
            "trigger_tokens": list(trigger),
            "trigger_search": {
                "examples": len(sentences),
                "queries": victim.queries,
                "iterations": max(len(history) - 1, 0),
                "history": history,
            },
        }

    def report(self) -> dict:
        return dict(self._report)

    # -- each example ----------------------------------------------------------------------------

    def attack(self, victim: Victim, texts, gold, probs, rng):
        words = victim.start(texts, None)
        victim.queries = 1  # the clean prediction (`probs`), as the other recipes count it
        perturbed = self.with_trigger(words, self._trigger)
        after = victim.probabilities([perturbed])[0]
        start = 0 if self.params.position == "prepend" else len(words)
        changed = list(range(start, start + self.params.trigger_length))
        return perturbed, changed, after, SUCCEEDED if int(after.argmax()) != gold else FAILED

"""The attacked model as the recipes see it: a sentence (a list of words) in, the label
probabilities out, every sentence scored counted as one query against a per-example budget.

For a pair task (entailment, paraphrase) one side is attacked and the other held fixed: the
second text (the hypothesis / second question), as TextAttack and the BERT-Attack and TextFooler
papers do for NLI. Words are the whitespace-separated tokens of that text (GLUE's files are
tokenized already), so a perturbed text is its words joined by single spaces.
"""

from __future__ import annotations

import torch

from lightning_modules.artifacts.saved_task_model import LoadedTaskModel

ATTACKED_SIDE = {1: 0, 2: 1}   # texts per example -> the index of the attacked one


class QueryBudgetSpent(Exception):
    """Raised inside a recipe when an example has used its `max_queries` (the attack fails)."""


class Victim:
    def __init__(self, loaded: LoadedTaskModel, task: str, batch_size: int = 64):
        self.loaded, self.task, self.batch_size = loaded, task, int(batch_size)
        self.context: tuple[str, ...] = ()
        self.side = 0
        self.queries = 0
        self.max_queries: int | None = None

    def start(self, texts: tuple[str, ...], max_queries: int | None) -> list[str]:
        """Begin an example: its attacked words; the query count starts from 0."""
        self.side = ATTACKED_SIDE[len(texts)]
        self.context = tuple(texts)
        self.queries, self.max_queries = 0, max_queries
        return texts[self.side].split()

    def texts(self, words: list[str]) -> tuple[str, ...]:
        out = list(self.context)
        out[self.side] = " ".join(words)
        return tuple(out)

    @torch.no_grad()
    def probabilities(self, sentences: list[list[str]], *, count: bool = True) -> torch.Tensor:
        """N×C label probabilities; raises QueryBudgetSpent before a batch that would exceed the budget."""
        if count:
            if self.max_queries is not None and self.queries + len(sentences) > self.max_queries:
                raise QueryBudgetSpent
            self.queries += len(sentences)
        out = []
        for start in range(0, len(sentences), self.batch_size):
            batch = self.loaded.encode([self.texts(w) for w in sentences[start:start + self.batch_size]], self.task)
            out.append(torch.softmax(self.loaded.model.task_logits(self.task, batch).float(), dim=-1).cpu())
        return torch.cat(out) if out else torch.empty(0)

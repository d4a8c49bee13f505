"""The attacked model as the recipes see it: a sentence (a list of words) in, the label
probabilities out, every sentence scored counted as one query against a per-example budget.

For a pair task (entailment, paraphrase) one side is attacked and the other held fixed: the
second text (the hypothesis / second question), as TextAttack and the BERT-Attack and TextFooler
papers do for NLI. Words are the whitespace-separated tokens of that text (GLUE's files are
tokenized already), so a perturbed text is its words joined by single spaces.

Gradient-guided recipes (triggers) also see the model as white box: its word-embedding matrix,
the token ids a sentence encodes to, and the gradient of the gold labels' cross-entropy with
respect to each token's word embedding (`embedding_gradients`; each sentence one query).
"""

from __future__ import annotations

import torch

from lightning_modules.artifacts.saved_task_model import LoadedTaskModel

ATTACKED_SIDE = {1: 0, 2: 1}  # texts per example -> the index of the attacked one


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

    def texts(self, words: list[str], context: tuple[str, ...] | None = None) -> tuple[str, ...]:
        """The model's input with `words` as the attacked text of `context` (None: the current example's)."""
        out = list(self.context if context is None else context)
        out[self.side if context is None else ATTACKED_SIDE[len(context)]] = " ".join(words)
        return tuple(out)

    def count(self, sentences: list[list[str]]) -> None:
        """Count the sentences as queries; QueryBudgetSpent before a batch that would exceed the budget."""
        if self.max_queries is not None and self.queries + len(sentences) > self.max_queries:
            raise QueryBudgetSpent
        self.queries += len(sentences)

    def batches(self, sentences: list[list[str]], contexts: list[tuple[str, ...]] | None = None):
        """The sentences encoded as the model was trained, `batch_size` at a time; `contexts`: each
        sentence's own example (a universal search scores many examples in one call)."""
        for start in range(0, len(sentences), self.batch_size):
            chunk = range(start, min(start + self.batch_size, len(sentences)))
            yield self.loaded.encode(
                [self.texts(sentences[i], None if contexts is None else contexts[i]) for i in chunk], self.task
            )

    @torch.no_grad()
    def probabilities(self, sentences: list[list[str]], *, count: bool = True) -> torch.Tensor:
        """N×C label probabilities; raises QueryBudgetSpent before a batch that would exceed the budget."""
        if count:
            self.count(sentences)
        out = [
            torch.softmax(self.loaded.model.task_logits(self.task, batch).float(), dim=-1).cpu()
            for batch in self.batches(sentences)
        ]
        return torch.cat(out) if out else torch.empty(0)

    @torch.no_grad()
    def gold_losses(
        self, sentences: list[list[str]], golds: list[int], contexts: list[tuple[str, ...]] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(N cross-entropies of the gold labels, N predicted labels), from the logits (no softmax
        round trip: a confident model's losses stay apart)."""
        self.count(sentences)
        losses, predicted = [], []
        for k, batch in enumerate(self.batches(sentences, contexts)):
            logits = self.loaded.model.task_logits(self.task, batch).float().cpu()
            gold = torch.tensor(golds[k * self.batch_size : (k + 1) * self.batch_size])
            losses.append(torch.nn.functional.cross_entropy(logits, gold, reduction="none"))
            predicted.append(logits.argmax(-1))
        return (torch.cat(losses), torch.cat(predicted)) if losses else (torch.empty(0), torch.empty(0))

    # -- white box: what gradient-guided recipes read -------------------------------------------

    def word_embeddings(self) -> torch.nn.Module:
        return self.loaded.model.backbone.get_input_embeddings()

    def embedding_matrix(self) -> torch.Tensor:
        """V×E: the word embedding of every token id."""
        return self.word_embeddings().weight.detach().float().cpu()

    def token_ids(
        self, sentences: list[list[str]], contexts: list[tuple[str, ...]] | None = None
    ) -> list[torch.Tensor]:
        """Each sentence's token ids as the model reads it (special tokens included, no padding); not a query."""
        out = []
        for batch in self.batches(sentences, contexts):
            out.extend(ids[mask.bool()].cpu() for ids, mask in zip(batch["input_ids"], batch["attention_mask"]))
        return out

    def embedding_gradients(
        self, sentences: list[list[str]], golds: list[int], contexts: list[tuple[str, ...]] | None = None
    ) -> list[torch.Tensor]:
        """Per sentence, T×E: ∂ CE(gold) / ∂ (the word embedding of each of its T tokens), the
        positions of `token_ids`. The embeddings' output is swapped for a leaf that requires grad
        (a forward hook), so no parameter gets a gradient and any backbone takes it."""
        self.count(sentences)
        captured: list[torch.Tensor] = []

        def leaf(module, args, output):
            captured.append(output.detach().requires_grad_(True))
            return captured[-1]

        out = []
        handle = self.word_embeddings().register_forward_hook(leaf)
        try:
            for k, batch in enumerate(self.batches(sentences, contexts)):
                captured.clear()
                with torch.enable_grad():
                    logits = self.loaded.model.task_logits(self.task, batch).float()
                    gold = torch.tensor(golds[k * self.batch_size : (k + 1) * self.batch_size], device=logits.device)
                    # summed, so each sentence's gradient is its own loss's
                    loss = torch.nn.functional.cross_entropy(logits, gold, reduction="sum")
                    (grad,) = torch.autograd.grad(loss, captured[0])
                mask = batch["attention_mask"].bool()
                grad = grad[:, -mask.shape[1] :]  # B×T'×E -> B×T×E: a prompt's virtual tokens sit in front
                out.extend(g[m].float().cpu() for g, m in zip(grad, mask))
        finally:
            handle.remove()
        return out

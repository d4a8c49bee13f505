"""A sentence of words with one tag per word: what the token-classification readers return
(data/conll_columns.py, data/conllu_tags.py), and the BIO repair applied to tags.

BIO repair (IOB2 out of whatever BIO-like tags a file or a model gives), one rule:
  an `I-X` that does not continue an entity of type X (it follows `O`, starts the sentence, or
  follows `B-Y`/`I-Y` of another type Y) becomes `B-X`.
That is how conlleval and seqeval's default mode read such a tag (it starts a new entity), so
repairing never changes the default-mode score; it turns IOB1 files (CoNLL-2003's original
encoding) into IOB2 and makes written predictions valid IOB2. Tags that are not BIO (UPOS, XPOS)
pass through untouched.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaggedSentence:
    words: tuple[str, ...]
    label: (
        tuple | None
    )  # one tag per word: raw strings from the reader, class indices after load_task; None: unlabelled
    row: int  # 1-based line number of the first word
    id: str  # the sentence's position in its file (0-based), as a string
    lines: tuple[int, ...]  # each word's line number (error messages)
    columns: tuple[tuple[str, ...], ...]  # each word's input columns, written back beside the prediction

    @property
    def texts(self) -> tuple[tuple[str, ...]]:
        """What an encoder reads: the words (one 'text' of pre-split words)."""
        return (self.words,)


def is_bio(tag: str) -> bool:
    return tag == "O" or (len(tag) > 2 and tag[:2] in ("B-", "I-"))


def repair_bio(tags: list[str] | tuple[str, ...]) -> list[str]:
    """The one repair rule above; non-BIO tags unchanged."""
    out: list[str] = []
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and len(tag) > 2:
            kind = tag[2:]
            if previous[:2] not in ("B-", "I-") or previous[2:] != kind:
                tag = "B-" + kind
        out.append(tag)
        previous = tag
    return out


def sort_tags(tags: set[str]) -> tuple[str, ...]:
    """A label set in a stable, readable order: O first, then by entity type with B- before I-
    (BIO tags), else alphabetical."""

    def key(tag: str):
        if tag == "O":
            return (0, "", "")
        if is_bio(tag):
            return (1, tag[2:], tag[:2])
        return (2, tag, "")

    return tuple(sorted(tags, key=key))

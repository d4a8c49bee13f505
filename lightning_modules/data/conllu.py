"""CoNLL-U treebanks (Universal Dependencies), read as the format specifies
(https://universaldependencies.org/format.html):

- a sentence is a block of word lines ended by a blank line; `#` lines are comments
  (`# sent_id = ...`, `# text = ...`);
- a word line has 10 tab-separated fields: ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC;
- a multiword token (`1-2  don't ...`) is a surface token over the syntactic words that follow it:
  the words carry the annotation, the token line is skipped;
- an empty node (`8.1 ...`, enhanced dependencies) is not part of the basic tree: skipped.

A malformed line raises DataError naming the file and the line number.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ptmlab.contracts import DataError

FIELDS = 10
PUNCT_UPOS = frozenset({"PUNCT"})


@dataclass
class ConlluSentence:
    words: list[str]
    upos: list[str]
    xpos: list[str]
    heads: list[int]  # 1-based index of each word's head, 0 = the root; -1 where HEAD is `_`
    deprels: list[str]
    feats: list[dict[str, str]]
    sent_id: str | None = None
    text: str | None = None
    line: int = 0  # line number of the sentence's first word
    source: str = ""

    def __len__(self) -> int:
        return len(self.words)

    @property
    def is_punct(self) -> list[bool]:
        return [u in PUNCT_UPOS for u in self.upos]

    def depths(self) -> list[int]:
        """Each word's depth in the tree (the root's dependent = 1... the root word itself is 0)."""
        depth = [-1] * len(self)
        for i in range(len(self)):
            chain, j = [], i
            while depth[j] < 0 and self.heads[j] > 0 and len(chain) <= len(self):
                chain.append(j)
                j = self.heads[j] - 1
            base = depth[j] if depth[j] >= 0 else 0
            if depth[j] < 0:
                depth[j] = 0
            for k in reversed(chain):
                base += 1
                depth[k] = base
        return depth


@dataclass
class Treebank:
    path: Path
    sentences: list[ConlluSentence] = field(default_factory=list)
    sha256: str = ""

    def __len__(self) -> int:
        return len(self.sentences)


def _parse_feats(text: str) -> dict[str, str]:
    if text == "_":
        return {}
    out = {}
    for item in text.split("|"):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"FEATS item {item!r} is not Name=Value")
        out[key] = value
    return out


def read_conllu(path: str | Path, max_sentences: int | None = None) -> Treebank:
    """The sentences of a CoNLL-U file (the first `max_sentences` of them if given)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"CoNLL-U file not found: {path}")
    raw = path.read_bytes()
    bank = Treebank(path=path, sha256=hashlib.sha256(raw).hexdigest())
    text = raw.decode("utf-8-sig", errors="strict")
    current: list[tuple[int, list[str]]] = []
    comments: dict[str, str] = {}

    def finish() -> None:
        if current:
            bank.sentences.append(_build_sentence(path, current, comments))
        current.clear()
        comments.clear()

    for lineno, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if max_sentences is not None and len(bank.sentences) >= max_sentences:
            break
        if not line.strip():
            finish()
            continue
        if line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            if sep:
                comments[key.strip()] = value.strip()
            continue
        columns = line.split("\t")
        if len(columns) != FIELDS:
            raise DataError(f"{path}:{lineno}: expected {FIELDS} tab-separated fields, found {len(columns)}")
        current.append((lineno, columns))
    finish()
    if max_sentences is not None:
        bank.sentences = bank.sentences[:max_sentences]
    return bank


def _build_sentence(path: Path, lines: list[tuple[int, list[str]]], comments: dict[str, str]) -> ConlluSentence:
    words, upos, xpos, heads, deprels, feats = [], [], [], [], [], []
    for lineno, cols in lines:
        wid = cols[0]
        if "-" in wid or "." in wid:  # multiword token / empty node: not a word of the basic tree
            lo, _, hi = wid.replace(".", "-").partition("-")
            if not (lo.isdigit() and hi.isdigit()):
                raise DataError(f"{path}:{lineno}: malformed ID {wid!r}")
            continue
        if not wid.isdigit():
            raise DataError(f"{path}:{lineno}: malformed ID {wid!r} (expected an integer, a range or a decimal)")
        if int(wid) != len(words) + 1:
            raise DataError(f"{path}:{lineno}: word ID {wid} out of sequence (expected {len(words) + 1})")
        head = cols[6]
        if head == "_":
            heads.append(-1)
        elif head.isdigit():
            heads.append(int(head))
        else:
            raise DataError(f"{path}:{lineno}: HEAD {head!r} is not an integer")
        try:
            feats.append(_parse_feats(cols[5]))
        except ValueError as exc:
            raise DataError(f"{path}:{lineno}: {exc}") from None
        words.append(cols[1])
        upos.append(cols[3])
        xpos.append(cols[4])
        deprels.append(cols[7])
    if not words:
        raise DataError(f"{path}:{lines[0][0]}: a sentence without words")
    for (lineno, _cols), head in zip([lc for lc in lines if lc[1][0].isdigit()], heads):
        if head > len(words):
            raise DataError(f"{path}:{lineno}: HEAD {head} beyond the sentence's {len(words)} words")
    return ConlluSentence(
        words, upos, xpos, heads, deprels, feats, comments.get("sent_id"), comments.get("text"), lines[0][0], str(path)
    )

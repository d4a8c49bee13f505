"""Prompt templates and verbalizers (PET, Schick & Schütze 2021; LM-BFF, Gao et al. 2021): an
example becomes a cloze and the model's LM head scores each label's words at the slot.

    template     "{sentence} It was [MASK] ."  (or {sentence1} / {sentence2} for pair tasks)
    verbalizer   {"0": "terrible", "1": ["great", "good"]}: label value -> word(s)

Encoders read the slot: `[CLS] <filled template> [SEP]`, the slot is the tokenizer's mask token
and `pool_index` points at it. Causal decoders predict the slot as the next token: the template is
cut at [MASK] and `pool_index` is the last position (`<start> <template up to the slot>`).

Only the sentence fields are truncated (longest first), never the template's words, the slot
or demonstrations' label words, so the slot survives `task.max_length`.

Demonstrations (LM-BFF): k training examples per label, filled in with their label's first word in
the slot, follow the input separated by the sep token (encoders) or precede it (decoders, whose
input must end at the slot). Unlike LM-BFF, which samples fresh demonstrations for every example,
they are drawn once per run with the run's seed and are the same for every input.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from lightning_modules.tasks.encoding import PairEncoder, _first_id, _truncate_longest_first
from ptmlab.contracts import ConfigError

MASK_SLOT = "[MASK]"
SINGLE_FIELDS, PAIR_FIELDS = ("sentence",), ("sentence1", "sentence2")
_PIECE = re.compile(r"(\{sentence[12]?\}|\[MASK\])")


def template_fields(template: str) -> tuple[str, ...]:
    """The text fields a template reads, in the order of the example's texts."""
    used = set(re.findall(r"\{(sentence[12]?)\}", template))
    if used == set(SINGLE_FIELDS):
        return SINGLE_FIELDS
    if used == set(PAIR_FIELDS):
        return PAIR_FIELDS
    raise ConfigError(
        f"task.prompt.template={template!r} must hold {{sentence}} (single-sentence tasks) "
        f"or both {{sentence1}} and {{sentence2}} (pair tasks), not {sorted(used)}"
    )


def normalize_verbalizer(verbalizer: dict) -> dict[str, list[str]]:
    """Label value (str) -> list of words, whether the config gave a word or a list."""
    return {str(k): [str(v)] if isinstance(v, str) else [str(w) for w in v] for k, v in verbalizer.items()}


def _slot_follows_space(template: str) -> bool:
    before = template.split(MASK_SLOT, 1)[0]
    return not before or before[-1].isspace()


def word_token_id(tokenizer, label: str, word: str, space_first: bool) -> int:
    """The id of `word` as one token: as is and with a leading space (byte-level BPE spells a word
    after a space differently, as LM-BFF does for RoBERTa). Several tokens or [UNK]: ConfigError."""
    key = f"task.prompt.verbalizer.{label}={word}"
    candidates = [" " + word, word] if space_first else [word, " " + word]
    first = None
    for text in candidates:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) == 1 and ids[0] != tokenizer.unk_token_id:
            return int(ids[0])
        first = first or ids
    if not first or (tokenizer.unk_token_id is not None and tokenizer.unk_token_id in first):
        raise ConfigError(
            f"{key} is outside this tokenizer's vocabulary ({tokenizer.unk_token}); pick a word that is one token"
        )
    pieces = ", ".join(tokenizer.convert_ids_to_tokens(first))
    raise ConfigError(f"{key} is {len(first)} tokens ({pieces}) for this tokenizer; pick a word that is one token")


def resolve_label_words(
    verbalizer: dict[str, list[str]], labels: tuple[str, ...], tokenizer, template: str
) -> list[list[int]]:
    """Per class index (the order of `labels`), the token ids of its words."""
    missing = [label for label in labels if label not in verbalizer]
    if missing:
        raise ConfigError(
            f"task.prompt.verbalizer has no word for label {missing[0]!r} (task.labels: {', '.join(labels)})"
        )
    extra = [key for key in verbalizer if key not in labels]
    if extra:
        raise ConfigError(
            f"task.prompt.verbalizer.{extra[0]} is not a label of the task (task.labels: {', '.join(labels)})"
        )
    space_first = _slot_follows_space(template)
    return [[word_token_id(tokenizer, label, w, space_first) for w in verbalizer[label]] for label in labels]


def draw_demonstrations(examples, num_labels: int, per_label: int, seed: int) -> list[dict]:
    """`per_label` training examples of each class, drawn once with `seed` (JSON-ready)."""
    rng = random.Random(seed)
    by_label: dict[int, list] = {}
    for ex in examples:
        by_label.setdefault(int(ex.label), []).append(ex)
    out = []
    for label in range(num_labels):
        pool = by_label.get(label, [])
        if len(pool) < per_label:
            raise ConfigError(
                f"adaptation.demonstrations={per_label} but the train split has {len(pool)} example(s) of class {label}"
            )
        out += [{"texts": list(ex.texts), "label": label} for ex in rng.sample(pool, per_label)]
    return out


@dataclass
class PromptTemplate:
    """What `PooledEncoder.input_template` holds: everything needed to encode inputs as cloze."""

    template: str
    label_token_ids: list[list[int]]  # per class: the ids of its words (the first fills demonstrations)
    demonstrations: list[dict] = field(default_factory=list)  # {"texts": [...], "label": class index}

    def encoder(self, tokenizer, *, causal: bool, max_length: int) -> TemplateEncoder:
        return TemplateEncoder(self, tokenizer, causal=causal, max_length=max_length)


class TemplateEncoder(PairEncoder):
    """PairEncoder's batching (`collate`, `encode_split`) with the template's layout (`encode`)."""

    def __init__(self, prompt: PromptTemplate, tokenizer, *, causal: bool, max_length: int = 128):
        super().__init__(tokenizer, causal=causal, max_length=max_length)
        self.prompt = prompt
        self.fields = template_fields(prompt.template)
        # [(kind, value)]: ("text", ids) template words | ("field", (name, spaced)) | ("slot", None).
        # A field after a space is tokenized with one (byte-level BPE spells " word" differently).
        self.pieces, previous = [], ""
        for part in _PIECE.split(prompt.template):
            if part == MASK_SLOT:
                self.pieces.append(("slot", None))
            elif part.startswith("{sentence"):
                self.pieces.append(("field", (part[1:-1], bool(previous) and previous[-1].isspace())))
            elif part.strip():
                self.pieces.append(("text", self._ids(part.rstrip())))
            previous = part or previous
        if causal:
            self.open, self.sep, self.close = [self.start_id], [self.delim_id], []
            self.mask_id = None  # the slot is predicted, not read: the input ends before it
        else:
            mask = tokenizer.mask_token_id
            if mask is None:
                raise ConfigError(
                    "prompt-based modes on an encoder need a tokenizer with a mask token "
                    "(tokenizer.mask_token_id is None)"
                )
            self.mask_id = int(mask)
            cls = _first_id(tokenizer.cls_token_id, tokenizer.bos_token_id)
            sep = _first_id(tokenizer.sep_token_id, tokenizer.eos_token_id)
            self.open, self.sep, self.close = [cls], [sep], [sep]
        self.demo_segments = [
            self._segments(d["texts"], fill=prompt.label_token_ids[d["label"]][0]) for d in prompt.demonstrations
        ]
        fixed = (
            len(self.open)
            + len(self.close)
            + _fixed(self._input_segments([""] * len(self.fields)))
            + sum(len(self.sep) + _fixed(s) for s in self.demo_segments)
        )
        if fixed >= self.max_length:
            raise ConfigError(
                f"task.max_length={self.max_length} leaves no room for the sentences: the template"
                f"{' and demonstrations' if self.demo_segments else ''} take {fixed} tokens"
            )

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _segments(self, texts, fill: int | None) -> list[list]:
        """[kind, ids] segments of one filled template; kind "field" is what truncation may cut.
        `fill`: the token put in the slot (a demonstration's label word; None: the mask)."""
        values = dict(zip(self.fields, texts, strict=True))
        out = []
        for kind, value in self.pieces:
            if kind == "text":
                out.append(["text", list(value)])
            elif kind == "field":
                name, spaced = value
                text = values[name].strip()
                out.append(["field", self._ids((" " if spaced else "") + text) if text else []])
            else:
                out.append(["slot", [fill if fill is not None else self.mask_id]])
        return out

    def _input_segments(self, texts) -> list[list]:
        """The input's own filled template; a causal decoder's stops before the slot."""
        segments = self._segments(texts, None)
        if self.causal:
            segments = segments[: [kind for kind, _ in segments].index("slot")]
        return segments

    def encode(self, texts) -> list[dict]:
        out = []
        for example in texts:
            if len(example) != len(self.fields):
                raise ConfigError(
                    f"task.prompt.template has fields {', '.join(self.fields)} but the task's "
                    f"examples have {len(example)} text(s)"
                )
            segments = self._input_segments(list(example))
            demos = [[[kind, list(ids)] for kind, ids in segs] for segs in self.demo_segments]
            every = [segments, *demos]
            fields = [ids for segs in every for kind, ids in segs if kind == "field"]
            total = (
                len(self.open)
                + len(self.close)
                + len(self.sep) * len(demos)
                + sum(len(ids) for segs in every for _, ids in segs)
            )
            # Cut the longest field (the input's or a demonstration's) first, as PairEncoder does
            # (in place: `fields` are the segments' own lists).
            _truncate_longest_first(fields, self.max_length - (total - sum(len(ids) for ids in fields)))
            body = [t for _, ids in segments for t in ids]
            context = [t for segs in demos for t in (*(t for _, ids in segs for t in ids), *self.sep)]
            if self.causal:  # demonstrations first: the input must end where the slot is predicted
                ids = [*self.open, *context, *body]
                pool_index = len(ids) - 1
            else:
                ids = [*self.open, *body, *self.close, *context]
                kinds = [kind for kind, _ in segments]
                pool_index = len(self.open) + sum(len(piece) for _, piece in segments[: kinds.index("slot")])
            out.append({"input_ids": ids, "token_type_ids": [0] * len(ids), "pool_index": pool_index})
        return out


def _fixed(segments) -> int:
    """Tokens truncation never cuts: template words and the slot."""
    return sum(len(ids) for kind, ids in segments if kind != "field")

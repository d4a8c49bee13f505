"""One SuperGLUE JSONL record -> the (pair) classification examples ptmlab trains on.

Each task becomes sentence-pair classification (the head reads [CLS] of `text_a [SEP] text_b`):

  BoolQ    (question, passage)                                     label true/false
  CB, RTE  (premise, hypothesis)                                   label as in the file
  WiC      (sentence1, sentence2), the target word marked in both  label true/false
           by `*` around the characters start1:end1 / start2:end2
           ("You make me *feel* naked." / "She *felt* small ...")
  WSC      (text with span1 in [ ] and span2 in * *, found by their label true/false
           word indices span1_index / span2_index on the text split
           at spaces, "Does <span2> refer to <span1> ?")
  MultiRC  (paragraph, "<question> <answer>"), one example per     label 0/1 per answer
           answer option; `group` = the question (paragraph line and
           question position), what exact match is scored over

Labels stay raw text ("True"/"False" for JSON booleans, "0"/"1" for MultiRC's integers, CB and RTE
strings): `load_task` maps them onto `task.labels` and names the file and line of any other value.
A missing field, a field of the wrong type or a marker offset outside its text is a DataError
naming the file, line and field. The SuperGLUE files hold a few spans whose text differs from the
words at their index (WSC val: `span2_text` "it" at a word "use"); the index is what is marked,
as the official data loaders do, and the count is reported in one note.
"""

from __future__ import annotations

from collections.abc import Callable

from lightning_modules.data.task_data import TextExample
from ptmlab.contracts import DataError

TARGET_MARK = "*"  # around WiC's target word and WSC's pronoun (span2)
REFERENT_MARKS = ("[", "]")  # around WSC's candidate referent (span1)


class RowContext:
    """Where a record came from, for its error messages, and the span mismatches noticed in it."""

    def __init__(self, path: str, line: int):
        self.path, self.line = path, line
        self.mismatches = 0

    def error(self, what: str) -> DataError:
        return DataError(f"{self.path}: line {self.line}: {what}")

    def field(self, record: dict, key: str, kind: type | tuple[type, ...] = str):
        value = record.get(key) if isinstance(record, dict) else None
        if value is None:
            raise self.error(f"field '{key}' is missing")
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
            raise self.error(f"field '{key}' is {type(value).__name__} {value!r}, not {names}")
        return value

    def label(self, record: dict) -> str:
        """The raw label as text: JSON true/false -> "True"/"False", numbers and strings as written."""
        return str(self.field(record, "label", (bool, int, str)))


def _example(
    ctx: RowContext,
    record: dict,
    texts: tuple[str, str],
    *,
    group: str | None = None,
    label: str | None = None,
    example_id: str | None = None,
) -> TextExample:
    return TextExample(
        texts=texts,
        label=ctx.label(record) if label is None else label,
        row=ctx.line,
        id=str(record.get("idx", ctx.line)) if example_id is None else example_id,
        group=group,
    )


def boolq_examples(record: dict, ctx: RowContext) -> list[TextExample]:
    return [_example(ctx, record, (ctx.field(record, "question"), ctx.field(record, "passage")))]


def entailment_examples(record: dict, ctx: RowContext) -> list[TextExample]:
    """CB and RTE."""
    return [_example(ctx, record, (ctx.field(record, "premise"), ctx.field(record, "hypothesis")))]


def mark_characters(ctx: RowContext, text: str, start: int, end: int, key: str) -> str:
    """`text` with TARGET_MARK around text[start:end] (WiC's start1/end1, start2/end2)."""
    if not 0 <= start < end <= len(text):
        raise ctx.error(f"target offsets {key}: {start}:{end} are outside the sentence ({len(text)} characters)")
    return f"{text[:start]}{TARGET_MARK}{text[start:end]}{TARGET_MARK}{text[end:]}"


def wic_examples(record: dict, ctx: RowContext) -> list[TextExample]:
    texts = tuple(
        mark_characters(
            ctx,
            ctx.field(record, f"sentence{i}"),
            ctx.field(record, f"start{i}", int),
            ctx.field(record, f"end{i}", int),
            f"start{i}/end{i}",
        )
        for i in (1, 2)
    )
    return [_example(ctx, record, texts)]


def mark_words(ctx: RowContext, words: list[str], index: int, span_text: str, marks: tuple[str, str], key: str) -> None:
    """Put `marks` around the words of `span_text` starting at word `index` (in place)."""
    length = max(len(span_text.split()), 1)
    if not 0 <= index <= len(words) - length:
        raise ctx.error(f"target.{key}={index} is outside the text ({len(words)} words)")
    found = " ".join(words[index : index + length])
    if found.lower().strip(".,;:!?\"'") != span_text.lower():
        ctx.mismatches += 1
    words[index] = marks[0] + words[index]
    words[index + length - 1] += marks[1]


def wsc_examples(record: dict, ctx: RowContext) -> list[TextExample]:
    target = ctx.field(record, "target", dict)
    words = ctx.field(record, "text").split(" ")
    span1, span2 = ctx.field(target, "span1_text"), ctx.field(target, "span2_text")
    mark_words(ctx, words, ctx.field(target, "span1_index", int), span1, REFERENT_MARKS, "span1_index")
    mark_words(ctx, words, ctx.field(target, "span2_index", int), span2, (TARGET_MARK, TARGET_MARK), "span2_index")
    return [_example(ctx, record, (" ".join(words), f"Does {span2} refer to {span1} ?"))]


def multirc_examples(record: dict, ctx: RowContext) -> list[TextExample]:
    passage = ctx.field(record, "passage", dict)
    paragraph = ctx.field(passage, "text")
    questions = ctx.field(passage, "questions", list)
    if not questions:
        raise ctx.error("field 'passage.questions' is empty")
    out = []
    for q_pos, question in enumerate(questions):
        text = ctx.field(question, "question")
        answers = ctx.field(question, "answers", list)
        if not answers:
            raise ctx.error(f"question {q_pos + 1}: field 'answers' is empty")
        # One question's options share a group: exact match needs all of them right. Line and
        # position, not the file's idx fields, so a group is unique in the file whatever they hold.
        group = f"{ctx.line}-{q_pos}"
        for a_pos, answer in enumerate(answers):
            ids = (record.get("idx", ctx.line), question.get("idx", q_pos), answer.get("idx", a_pos))
            out.append(
                _example(
                    ctx,
                    answer,
                    (paragraph, f"{text} {ctx.field(answer, 'text')}"),
                    group=group,
                    example_id="-".join(str(i) for i in ids),
                )
            )
    return out


ROW_READERS: dict[str, Callable[[dict, RowContext], list[TextExample]]] = {
    "boolq": boolq_examples,
    "cb": entailment_examples,
    "rte": entailment_examples,
    "wic": wic_examples,
    "wsc": wsc_examples,
    "multirc": multirc_examples,
}

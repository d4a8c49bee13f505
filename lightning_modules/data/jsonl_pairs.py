"""Source/target pairs in JSON Lines (DialogSum, XSum exports ...): one object per line, the source
text under `source_field`, the reference(s) under `target_field`.

`target_field` is a key or a list of keys; each value is a string or a list of strings, and every
one found is a reference (DialogSum's test file has three: `summary1..3`). Keys of the list absent
from a row are skipped, but a labelled row needs one non-empty reference. A split in which no row
holds any target key is unlabelled (predicted, not scored).

    task=seq2seq task.data.train=train.jsonl task.data.dev=dev.jsonl
                 task.data.source_field=dialogue task.data.target_field=summary

A missing file, a line that is not a JSON object, a missing source or an empty target is a
DataError naming the file, line and key.
"""

from __future__ import annotations

from pathlib import Path

from lightning_modules.data.jsonl_objects import jsonl_objects
from lightning_modules.data.line_pairs import read_lines
from lightning_modules.data.task_data import Split, TextExample
from ptmlab.contracts import DataError


def _references(path: Path, lineno: int, row: dict, fields: list[str]) -> tuple[str, ...] | None:
    """Every reference of a row (None: the row holds no target key)."""
    found = [f for f in fields if f in row]
    if not found:
        return None
    refs = []
    for f in found:
        values = row[f] if isinstance(row[f], list) else [row[f]]
        for value in values:
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"{path}: line {lineno}: empty target under key '{f}'")
            refs.append(value)
    if not refs:
        raise DataError(f"{path}: line {lineno}: empty target under key '{found[0]}'")
    return tuple(refs)


def read_jsonl_pairs(name: str, path: str | Path, source_field: str, target_field: str | list[str]) -> Split:
    path = Path(path)
    fields = [target_field] if isinstance(target_field, str) else [str(f) for f in target_field]
    examples, labelled = [], None
    for lineno, row in jsonl_objects(path, read_lines(path, f"task.data.{name}")):
        source = row.get(source_field)
        if not isinstance(source, str):
            raise DataError(f"{path}: line {lineno}: no text under key '{source_field}' (task.data.source_field)")
        refs = _references(path, lineno, row, fields)
        if labelled is None:
            labelled = refs is not None
        elif labelled != (refs is not None):
            raise DataError(
                f"{path}: line {lineno}: no key of task.data.target_field={fields} but earlier rows have one"
                if labelled
                else f"{path}: line {lineno}: a target where earlier rows have none (task.data.target_field={fields})"
            )
        examples.append(
            TextExample(texts=(source,), label=refs, row=lineno, id=str(row.get("id", row.get("fname", len(examples)))))
        )
    return Split(name, examples, str(path), has_labels=bool(labelled))

"""The objects of a JSON Lines file: every reader of one (SuperGLUE, the tabular reader's .jsonl,
multiple choice, generation pairs, LAMA's facts) goes through `jsonl_objects`, so a bad line is
refused in the same words everywhere."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from ptmlab.contracts import DataError


def jsonl_objects(path: str | Path, lines: Iterable[str]) -> Iterator[tuple[int, dict]]:
    """(line number, object) of every non-blank line of `lines` (read from `path` by the caller,
    which knows its encoding and its missing-file message); a line that is not a JSON object is a
    DataError naming the file and the line."""
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: line {line_no} is not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}: line {line_no} is not a JSON object")
        yield line_no, record

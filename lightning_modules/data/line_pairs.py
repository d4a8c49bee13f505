"""Line-aligned parallel files (WMT's `newstest2016-enro.en` / `.ro`, Moses-style corpora): line i
of the source file and line i of the target file are one example, the target its one reference.

    task=seq2seq task.data.train.source=train.en task.data.train.target=train.ro
                 task.data.dev.source=dev.en task.data.dev.target=dev.ro

A missing file, files of different line counts or an empty target line is a DataError naming the
file and line. Plain text or gzip (`.gz`), UTF-8 (a byte-order mark is dropped).
"""

from __future__ import annotations

import gzip
from pathlib import Path

from lightning_modules.data.task_data import Split, TextExample
from ptmlab.contracts import DataError


def read_lines(path: Path, key: str) -> list[str]:
    if not path.is_file():
        raise DataError(f"{path}: file not found ({key})")
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    text = raw.decode("utf-8-sig")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start another
    return [line.rstrip("\r") for line in lines]


def read_line_pairs(name: str, source: str | Path, target: str | Path | None) -> Split:
    """One split from a source file and (optionally: then it is unlabelled) a target file."""
    source = Path(source)
    sources = read_lines(source, f"task.data.{name}.source")
    if target is None:
        examples = [TextExample(texts=(s,), label=None, row=i, id=str(i - 1)) for i, s in enumerate(sources, 1)]
        return Split(name, examples, str(source), has_labels=False)
    target = Path(target)
    targets = read_lines(target, f"task.data.{name}.target")
    if len(sources) != len(targets):
        raise DataError(
            f"{target}: {len(targets)} lines but the source {source} has {len(sources)} "
            f"(task.data.{name}: line-aligned files must have as many lines)"
        )
    examples = []
    for i, (s, t) in enumerate(zip(sources, targets), start=1):
        if not t.strip():
            raise DataError(f"{target}: line {i}: empty target (task.data.{name}.target)")
        examples.append(TextExample(texts=(s,), label=(t,), row=i, id=str(i - 1)))
    return Split(name, examples, str(target), has_labels=True)

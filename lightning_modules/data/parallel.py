"""Parallel text for translation language modelling (XLM's TLM): files of tab-separated
"source<TAB>target" lines, one sentence pair per line.

Each pair becomes a two-line document [source, target], so the pretrain datamodule's
`segment_pairs` construction with `pair_negative=none` turns it into
"[CLS] source [SEP] target [SEP]" with token_type_ids 0/1 (the language ids) and no negatives.
"""

from __future__ import annotations

from collections.abc import Iterator

from lightning_modules.data.corpus import TextFilesCorpus
from ptmlab.contracts import DataError
from ptmlab.methods.readers import ParallelTextCorpusParams


class ParallelTextCorpus(TextFilesCorpus):
    declaration = ParallelTextCorpusParams

    name = "parallel_text"

    def __init__(
        self,
        path: str,
        pattern: str = "*.tsv",
        max_documents: int | None = None,
        encoding: str = "utf-8",
        separator: str = "\t",
    ):
        self.separator = separator
        super().__init__(
            path, pattern=pattern, paragraph_documents=False, max_documents=max_documents, encoding=encoding
        )

    def pairs(self) -> Iterator[tuple[str, str]]:
        produced = 0
        for file, text in self.file_texts("parallel corpus file"):
            for number, raw in enumerate(text.splitlines(), start=1):
                if not raw.strip():
                    continue
                fields = raw.split(self.separator)
                if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
                    raise DataError(
                        f"{file}:{number}: expected 'source<TAB>target' (two non-empty "
                        f"tab-separated fields), got {len(fields)} field(s)"
                    )
                yield fields[0].strip(), fields[1].strip()
                produced += 1
                if self.max_documents and produced >= self.max_documents:
                    return

    def documents(self) -> Iterator[list[str]]:
        for source, target in self.pairs():
            yield [source, target]

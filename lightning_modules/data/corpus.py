"""Plain-text corpora for pre-training.

A corpus yields documents, each a list of non-empty lines (a line is the unit of
line-by-line construction; consecutive lines of one document are what sentence-pair
objectives such as NSP/SOP pair up). `files()` lists the input files (hashed into provenance)
and `fingerprint()` identifies the content for the tokenizer and block caches.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from ptmlab.contracts import DataError
from ptmlab.methods.readers import CorpusParams, HFDatasetCorpusParams, TextFilesCorpusParams


class Corpus:
    name = "corpus"

    def documents(self) -> Iterator[list[str]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def files(self) -> list[Path]:
        return []

    def fingerprint(self) -> str:
        """Content hash: the tokenizer and block caches are keyed by it."""
        h = hashlib.sha256()
        for doc in self.documents():
            for line in doc:
                h.update(line.encode("utf-8"))
                h.update(b"\n")
            h.update(b"\x00")
        return h.hexdigest()


def _split_documents(text: str, paragraph_documents: bool) -> list[list[str]]:
    if not paragraph_documents:
        lines = [ln.strip() for ln in text.splitlines()]
        return [[ln for ln in lines if ln]]
    docs, current = [], []
    for raw in text.splitlines():
        line = raw.strip()
        if line:
            current.append(line)
        elif current:
            docs.append(current)
            current = []
    if current:
        docs.append(current)
    return docs


class TextFilesCorpus(Corpus):
    """A text file or a folder of them (`pattern`, searched recursively, sorted by path).

    Each file is one document unless `paragraph_documents`, where blank lines separate
    documents (speeches in tiny-shakespeare, paragraphs in a book).
    """

    declaration = TextFilesCorpusParams

    name = "text_files"

    def __init__(
        self,
        path: str,
        pattern: str = "*.txt",
        paragraph_documents: bool = False,
        max_documents: int | None = None,
        encoding: str = "utf-8",
    ):
        self.path = Path(str(path)).expanduser()
        self.pattern = pattern
        self.paragraph_documents = paragraph_documents
        self.max_documents = max_documents
        self.encoding = encoding
        if not self.path.exists():
            raise DataError(f"corpus path not found: {self.path} (data.corpus.path; is PTMLAB_DATA_DIR set?)")
        if not self.files():
            raise DataError(f"no files matching '{pattern}' under corpus path {self.path} (data.corpus.pattern)")

    def files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path]
        return sorted(p for p in self.path.rglob(self.pattern) if p.is_file())

    def file_texts(self, what: str = "corpus file") -> Iterator[tuple[Path, str]]:
        """(file, its text) of every file, in order; an unreadable file is a DataError naming it."""
        for file in self.files():
            try:
                yield file, file.read_text(encoding=self.encoding, errors="replace")
            except OSError as exc:
                raise DataError(f"cannot read {what} {file}: {exc.strerror}") from None

    def documents(self) -> Iterator[list[str]]:
        produced = 0
        for _, text in self.file_texts():
            for doc in _split_documents(text, self.paragraph_documents):
                if not doc:
                    continue
                yield doc
                produced += 1
                if self.max_documents and produced >= self.max_documents:
                    return


class PythonDocstringCorpus(Corpus):
    """An offline corpus that ships with Python itself: the docstrings of the standard library
    (one document per module, paragraphs as lines). Deterministic for a given Python build, so
    the demo runs with no network and no shared data folder."""

    declaration = CorpusParams

    name = "python_docstrings"

    def __init__(self, max_documents: int | None = None):
        self.max_documents = max_documents
        self.stdlib = Path(sysconfig.get_paths()["stdlib"])

    def files(self) -> list[Path]:
        skip = ("site-packages", "test", "tests", "idlelib", "lib2to3", "turtledemo")
        return sorted(
            p for p in self.stdlib.rglob("*.py") if not any(part in skip for part in p.relative_to(self.stdlib).parts)
        )

    @staticmethod
    def _docstrings(source: str) -> list[str]:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return []
        nodes = [
            tree,
            *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))),
        ]
        out = []
        for node in nodes:
            doc = ast.get_docstring(node)
            if doc:
                out.append(doc)
        return out

    def fingerprint(self) -> str:
        """The documents are a fixed function of the stdlib files: hash those files and the code
        that reads them (parsing ~580 modules for their docstrings took 5-7 s of every job on the
        default `data=offline`; their bytes hash in ~0.4 s)."""
        h = hashlib.sha256(inspect.getsource(PythonDocstringCorpus).encode())
        h.update(f"{sys.version}|{self.max_documents}".encode())
        for file in self.files():
            h.update(str(file.relative_to(self.stdlib)).encode() + b"\x00")
            try:
                with file.open("rb") as handle:
                    h.update(hashlib.file_digest(handle, "sha256").digest())
            except OSError:  # unreadable files are skipped by documents() too
                h.update(b"unreadable")
        return h.hexdigest()

    def documents(self) -> Iterator[list[str]]:
        produced = 0
        for file in self.files():
            try:
                source = file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            lines: list[str] = []
            for doc in self._docstrings(source):
                # A paragraph (joined lines between blank lines) is one line of the document.
                for para in doc.split("\n\n"):
                    text = " ".join(para.split())
                    if len(text) > 20 and not text.startswith(">>>"):
                        lines.append(text)
            if lines:
                yield lines
                produced += 1
                if self.max_documents and produced >= self.max_documents:
                    return


class HFDatasetCorpus(Corpus):
    """A Hugging Face dataset by name (needs the network or a local HF cache). Rows are lines;
    empty rows separate documents (the wikitext convention)."""

    declaration = HFDatasetCorpusParams

    name = "hf_dataset"

    def __init__(
        self,
        name: str,
        config_name: str | None = None,
        split: str = "train",
        text_field: str = "text",
        max_documents: int | None = None,
    ):
        import datasets

        self.dataset_name = name
        try:
            self.dataset = datasets.load_dataset(name, config_name, split=split)
        except Exception as exc:
            raise DataError(
                f"cannot load Hugging Face dataset '{name}' (config {config_name}, split {split}): "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from None
        if text_field not in self.dataset.column_names:
            raise DataError(
                f"dataset '{name}' has no column '{text_field}' (data.corpus.text_field); columns: {self.dataset.column_names}"
            )
        self.text_field = text_field
        self.max_documents = max_documents

    def fingerprint(self) -> str:
        return hashlib.sha256(f"{self.dataset_name}:{self.dataset._fingerprint}".encode()).hexdigest()

    def documents(self) -> Iterator[list[str]]:
        produced, current = 0, []
        for row in self.dataset:
            line = (row[self.text_field] or "").strip()
            if line:
                current.append(line)
                continue
            if current:
                yield current
                produced += 1
                current = []
                if self.max_documents and produced >= self.max_documents:
                    return
        if current:
            yield current

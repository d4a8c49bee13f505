"""Data readers: one declaration per task reader (`task.data`) and per pre-training corpus
(`data.corpus`), both in lightning_modules/data/ (constructor arguments)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from ptmlab.methods.fields import NODE, Name, NonNegativeInt, PositiveInt, TargetNode, checked


class GlueReaderParams(TargetNode):
    task: Literal["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"]
    data_dir: Name | None = None
    source: Literal["local", "hf"] = "local"
    hf_name: Name = "nyu-mll/glue"
    files: dict[str, Name] | None = None  # per-split file name overrides
    read_test: bool = True

    @model_validator(mode="after")
    def _local_needs_a_folder(self):
        if self.source == "local" and not self.data_dir:
            raise ValueError(f"{NODE}.data_dir is required for {NODE}.source=local")
        return self


class SentEvalReaderParams(TargetNode):
    task: Literal["MR", "CR", "SUBJ", "MPQA"]
    data_dir: Name


class TabularReaderParams(TargetNode):
    train: Name
    dev: Name
    test: Name | None = None
    text_fields: Annotated[list[Name], checked(lambda v: len(v) in (1, 2), "one or two field names")]
    label_field: Name | None = "label"
    id_field: Name | None = None
    format: Literal["auto", "tsv", "csv", "jsonl"] = "auto"
    quoting: Literal["none", "minimal"] | None = None


class ConllReaderParams(TargetNode):
    """CoNLL-style columns (lightning_modules/data/conll_columns.py): word and tag column indices,
    negative counting from the end; whether one is inside a file's rows is known only on reading."""

    train: Name
    dev: Name
    test: Name | None = None
    token_column: int = 0
    label_column: int = -1
    repair: bool = True

    @model_validator(mode="after")
    def _two_columns(self):
        if self.token_column == self.label_column:
            raise ValueError(f"{NODE}.token_column and {NODE}.label_column are both {self.token_column}")
        return self


class ConlluTagReaderParams(TargetNode):
    """CoNLL-U with a UD column as the label (lightning_modules/data/conllu_tags.py)."""

    train: Name
    dev: Name
    test: Name | None = None
    label_column: Literal["upos", "xpos", "deprel"] = "upos"
    max_sentences: PositiveInt | None = None


class Seq2SeqReaderParams(TargetNode):
    """Source/target pairs (lightning_modules/data/seq2seq_files.py): per split a JSONL path or
    {source, target} line-aligned files; one or several target keys."""

    train: str | dict[str, str | None]
    dev: str | dict[str, str | None]
    test: str | dict[str, str | None] | None = None
    source_field: Name = "source"
    target_field: Name | list[Name] = "target"


class SquadReaderParams(TargetNode):
    """SQuAD v1.1 / v2.0 JSON (lightning_modules/data/squad_json.py)."""

    train: Name
    dev: Name


class SuperGlueReaderParams(TargetNode):
    """SuperGLUE JSONL (lightning_modules/data/superglue.py); train may be absent with train_from_dev."""

    task: Literal["boolq", "cb", "rte", "wic", "wsc", "multirc"]
    train: Name | None = None
    dev: Name
    few_shot: PositiveInt | None = None
    train_from_dev: PositiveInt | None = None
    seed: int = 42


class MultipleChoiceReaderParams(TargetNode):
    """A context and N choices per JSON line (lightning_modules/data/choice_jsonl.py)."""

    train: Name
    dev: Name
    test: Name | None = None
    context_field: Name | list[Name] | None = "context"
    choices_field: Name | list[Name] = "choices"  # a list field, [field, ...], or a pattern with {i}
    label_field: Name = "label"
    id_field: Name | None = None
    connective_field: Name | None = None
    connectives: dict[str, str] | None = None
    train_from_dev: PositiveInt | None = None  # a seeded split of dev when only dev exists
    split_seed: NonNegativeInt = 0


READERS = {
    "lightning_modules.data.superglue.SuperGlueReader": SuperGlueReaderParams,
    "lightning_modules.data.choice_jsonl.MultipleChoiceReader": MultipleChoiceReaderParams,
    "lightning_modules.data.seq2seq_files.Seq2SeqReader": Seq2SeqReaderParams,
    "lightning_modules.data.conll_columns.ConllReader": ConllReaderParams,
    "lightning_modules.data.conllu_tags.ConlluTagReader": ConlluTagReaderParams,
    "lightning_modules.data.squad_json.SquadReader": SquadReaderParams,
    "lightning_modules.data.glue.GlueReader": GlueReaderParams,
    "lightning_modules.data.senteval.SentEvalReader": SentEvalReaderParams,
    "lightning_modules.data.tabular.TabularReader": TabularReaderParams,
}


class CorpusParams(TargetNode):
    max_documents: PositiveInt | None = None


class TextFilesCorpusParams(CorpusParams):
    path: Name
    pattern: Name = "*.txt"
    paragraph_documents: bool = False
    encoding: Name = "utf-8"


class ParallelTextCorpusParams(CorpusParams):
    path: Name
    pattern: Name = "*.tsv"
    encoding: Name = "utf-8"
    separator: Annotated[str, checked(len, "a non-empty string")] = "\t"


class HFDatasetCorpusParams(CorpusParams):
    name: Name
    config_name: str | None = None
    split: Name = "train"
    text_field: Name = "text"


CORPORA = {
    "lightning_modules.data.corpus.TextFilesCorpus": TextFilesCorpusParams,
    "lightning_modules.data.corpus.PythonDocstringCorpus": CorpusParams,
    "lightning_modules.data.corpus.HFDatasetCorpus": HFDatasetCorpusParams,
    "lightning_modules.data.parallel.ParallelTextCorpus": ParallelTextCorpusParams,
}

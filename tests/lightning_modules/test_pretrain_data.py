"""Corpora, tokenizer training/caching and sequence construction."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from lightning_modules.data.blocks import line_blocks, packed_blocks, segment_pairs, truncate_pair
from lightning_modules.data.corpus import PythonDocstringCorpus, TextFilesCorpus
from lightning_modules.data.tokenizer import build_tokenizer
from ptmlab.errors import ConfigError, DataError

WORDS = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox jumps".split()


def write_corpus(folder: Path, n_files: int = 3, lines: int = 200, seed: int = 0) -> Path:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(n_files):
        text = "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) for _ in range(lines))
        (folder / f"doc{f}.txt").write_text(text + "\n")
    return folder


def tok_cfg(kind="wordpiece", vocab_size=60, **kw):
    return OmegaConf.create(
        {"kind": kind, "vocab_size": vocab_size, "min_frequency": 1, "lowercase": True, "path": None, **kw}
    )


def test_text_files_corpus_reads_folder_sorted(tmp_path):
    corpus = TextFilesCorpus(str(write_corpus(tmp_path / "c")))
    docs = list(corpus.documents())
    assert [p.name for p in corpus.files()] == ["doc0.txt", "doc1.txt", "doc2.txt"]
    assert len(docs) == 3 and all(len(d) == 200 for d in docs)


def test_paragraph_documents(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("a b\nc d\n\n\ne f\n\ng\n")
    docs = list(TextFilesCorpus(str(f), paragraph_documents=True).documents())
    assert docs == [["a b", "c d"], ["e f"], ["g"]]


def test_missing_corpus_path_names_the_path(tmp_path):
    with pytest.raises(DataError, match=str(tmp_path / "nope")):
        TextFilesCorpus(str(tmp_path / "nope"))


def test_gutenberg_corpus_is_read(data_dir):
    corpus = TextFilesCorpus(str(data_dir / "corpus" / "gutenberg_nltk"))
    assert len(corpus.files()) == 13  # MANIFEST: 13 books (bible omitted)
    first = next(iter(corpus.documents()))
    assert first[0].startswith("[Emma by Jane Austen 1816]")


def test_python_docstring_corpus_is_offline_and_deterministic():
    corpus = PythonDocstringCorpus(max_documents=20)
    assert corpus.fingerprint() == PythonDocstringCorpus(max_documents=20).fingerprint()
    docs = list(corpus.documents())
    assert len(docs) == 20 and sum(len(d) for d in docs) > 50


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_tokenizer_trains_and_is_cached_by_corpus_hash(tmp_path, kind):
    corpus = TextFilesCorpus(str(write_corpus(tmp_path / "c")))
    size = 90 if kind == "wordpiece" else 300
    tok = build_tokenizer(tok_cfg(kind, size), corpus, tmp_path / "cache")
    assert len(tok) == size
    assert tok.mask_token_id is not None and tok.pad_token_id is not None
    ids = tok("the cat", "a dog")["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id and ids.count(tok.sep_token_id) == 2
    cached = list((tmp_path / "cache" / "tokenizers").glob("*/tokenizer.json"))
    assert len(cached) == 1
    build_tokenizer(tok_cfg(kind, size), corpus, tmp_path / "cache")
    assert list((tmp_path / "cache" / "tokenizers").glob("*/tokenizer.json")) == cached  # reused, not retrained
    other = TextFilesCorpus(str(write_corpus(tmp_path / "c2", seed=1)))
    build_tokenizer(tok_cfg(kind, size), other, tmp_path / "cache")
    assert len(list((tmp_path / "cache" / "tokenizers").glob("*/tokenizer.json"))) == 2  # new corpus, new entry


def test_jobs_started_together_train_one_tokenizer_and_share_it(tmp_path, monkeypatch):
    """Two builds of one cache entry at once: the second waits on the entry's lock and reads what the
    first wrote (WordPiece's tie-breaking differs between trainings, even in how many pieces a small
    corpus allows, so two trainings could disagree or one fail where the other passed)."""
    import threading
    import time

    from lightning_modules.data import tokenizer as tokenizer_module

    corpus = TextFilesCorpus(str(write_corpus(tmp_path / "c")))
    trainings, train = [], tokenizer_module._train_raw_tokenizer

    def slow_train(*args):
        trainings.append(threading.get_ident())
        time.sleep(0.5)  # the other build arrives while this one trains
        return train(*args)

    monkeypatch.setattr(tokenizer_module, "_train_raw_tokenizer", slow_train)
    built = [None, None]

    def build(i):
        built[i] = build_tokenizer(tok_cfg("wordpiece", 90), corpus, tmp_path / "cache")

    threads = [threading.Thread(target=build, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(trainings) == 1
    assert built[0].get_vocab() == built[1].get_vocab()


def test_vocabulary_larger_than_corpus_allows_is_refused(tmp_path):
    corpus = TextFilesCorpus(str(write_corpus(tmp_path / "c", n_files=1, lines=5)))
    with pytest.raises(ConfigError, match="tokenizer.vocab_size=5000"):
        build_tokenizer(tok_cfg("wordpiece", 5000), corpus, tmp_path / "cache")
    assert not any((tmp_path / "cache" / "tokenizers").glob("*/tokenizer.json"))


def test_packed_blocks_are_contiguous_and_framed():
    docs = [list(range(10, 30)), list(range(40, 55))]
    blocks = packed_blocks(docs, block_size=8, cls_id=1, sep_id=2)
    assert blocks.shape == (6, 8)  # (20 + 1 + 15 + 1) // 6 = 6 blocks of 6 body tokens
    assert (blocks[:, 0] == 1).all() and (blocks[:, -1] == 2).all()
    stream = blocks[:, 1:-1].reshape(-1).tolist()
    assert stream == (list(range(10, 30)) + [2] + list(range(40, 55)) + [2])[:36]


def test_corpus_smaller_than_one_block_is_refused():
    with pytest.raises(DataError, match="data.block_size=128"):
        packed_blocks([[5, 6, 7]], block_size=128, cls_id=1, sep_id=2)


def test_line_blocks_truncate():
    out = line_blocks([[5] * 20, [6, 7]], block_size=6, cls_id=1, sep_id=2)
    assert out == [[1, 5, 5, 5, 5, 2], [1, 6, 7, 2]]


def test_segment_pairs_labels_and_types():
    docs = [[[10 + i] * 3 for i in range(40)], [[100 + i] * 3 for i in range(40)]]
    pairs = segment_pairs(docs, block_size=16, cls_id=1, sep_id=2, rng=random.Random(0), negative="swap")
    assert 0.3 < sum(p["label"] for p in pairs) / len(pairs) < 0.7
    for p in pairs:
        a_first = p["input_ids"][1]
        b_first = p["input_ids"][p["token_type_ids"].index(1)]
        # SOP: a positive keeps document order (B's line follows A's), a negative swaps them.
        assert (b_first == a_first + 1) == (p["label"] == 1)
        assert len(p["input_ids"]) == len(p["token_type_ids"]) <= 16


def test_truncate_pair_trims_longer_first():
    a, b = truncate_pair(list(range(10)), list(range(3)), 8)
    assert (len(a), len(b)) == (5, 3)

"""The geometry probes (Ethayarajh 2019) against cases computed by hand, and their refusals."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_modules.probing.activations import Activations
from lightning_modules.probing.geometry import (
    anisotropy,
    check_treebank,
    contexts_by_word,
    intra_sentence_similarity,
    run_geometry_task,
    self_similarity,
)
from ptmlab.contracts import DataError

ROOT_HALF = 1 / math.sqrt(2)


def test_self_similarity_by_hand():
    # one word in three contexts: cos(e1, e2) = 0, cos(e1, e1+e2) = cos(e2, e1+e2) = 1/sqrt(2);
    # the mean over the 6 ordered pairs of different contexts is (0 + 2/sqrt(2)) * 2 / 6
    states = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [3.0, 0.0]])
    assert self_similarity(states, {"w": [0, 1, 2]}) == pytest.approx(2 * ROOT_HALF / 3)
    # two types: the mean of their scores (the second type's two vectors point the same way: 1)
    assert self_similarity(states, {"w": [0, 1, 2], "v": [0, 3]}) == pytest.approx((2 * ROOT_HALF / 3 + 1) / 2)


def test_intra_sentence_similarity_by_hand():
    # sentence 0: e1, e2 (mean (0.5, 0.5): each at 1/sqrt(2)); sentence 1: e1, 2·e1 (1); sentence 2,
    # one word, is left out
    states = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [2.0, 0.0], [0.0, 5.0]])
    offsets = torch.tensor([0, 2, 4, 5])
    assert intra_sentence_similarity(states, offsets) == pytest.approx((ROOT_HALF + 1) / 2)


def test_anisotropy_by_hand_counts_only_words_of_different_sentences():
    # every pair across sentences is e1 against e2: 0; pairs within a sentence (cosine 1) never count
    states = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 2.0]])
    sentence_of = torch.tensor([0, 0, 1, 1])
    assert anisotropy(states, sentence_of, 500, torch.Generator().manual_seed(0)) == pytest.approx(0.0, abs=1e-7)
    same = torch.ones(4, 3)
    assert anisotropy(same, sentence_of, 500, torch.Generator().manual_seed(0)) == pytest.approx(1.0)


def test_contexts_are_one_row_per_sentence_and_need_min_contexts():
    words = [["a", "b", "a"], ["a"], ["b", "a"], ["c"]]
    # rows: s0 a=0 b=1 a=2 | s1 a=3 | s2 b=4 a=5 | s3 c=6
    assert contexts_by_word(words, min_contexts=2) == {"a": [0, 3, 5], "b": [1, 4]}
    assert contexts_by_word(words, min_contexts=3) == {"a": [0, 3, 5]}


def test_a_run_reports_each_layer_raw_and_less_the_anisotropy():
    words = [["the", "cat", "sat"], ["the", "dog"]] * 5  # each of the 4 types in 5 sentences or more
    lengths = torch.tensor([len(w) for w in words])
    generator = torch.Generator().manual_seed(1)
    states = torch.randn(3, int(lengths.sum()), 8, generator=generator).half()  # 3 layers × words × H
    acts = Activations(states=states, lengths=lengths, key="k", forward_passes=0, cache_hit=True)
    result = run_geometry_task("self_similarity", acts, words, [0, 2], seed=0)
    assert result["family"] == "geometry" and result["metric"] == "self_similarity" and result["word_types"] == 4
    for entry in result["layers"]:
        expected = self_similarity(acts.layer(entry["layer"]), contexts_by_word(words))
        assert entry["self_similarity"] == pytest.approx(expected)
        assert entry["self_similarity_adjusted"] == pytest.approx(expected - entry["anisotropy"])
    assert [e["layer"] for e in result["layers"]] == [0, 2]


def test_a_treebank_that_cannot_give_a_value_is_refused_naming_the_file():
    with pytest.raises(DataError, match=r"^dev\.conllu: probe task self_similarity needs a word that occurs in 5"):
        check_treebank(["self_similarity"], [["a", "b"], ["c", "d"]], "dev.conllu")
    with pytest.raises(DataError, match=r"^dev\.conllu: the geometry probes need two sentences"):
        check_treebank(["anisotropy"], [["a", "b"]], "dev.conllu")
    with pytest.raises(DataError, match=r"^dev\.conllu: probe task intra_sentence_similarity needs a sentence of two"):
        check_treebank(["intra_sentence_similarity"], [["a"], ["b"]], "dev.conllu")
    check_treebank(["upos"], [["a"]], "dev.conllu")  # another family: nothing to check here

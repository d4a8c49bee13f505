"""LAMA's release layout loads as is (issue 21, item 7): tests/fixtures/lama_release is a
miniature of LAMA's data/ folder in its exact record shapes (see its README). T-REx facts are
scored by their relation's template from relations.jsonl found above the file or folder given,
Google-RE facts by LAMA's built-in templates, SQuAD facts by their masked sentences; `probe=lama`
on the whole folder scores every fact or counts it out-of-vocabulary on a tiny pretrained MLM."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from lightning_modules.probing import cloze
from ptmlab.config import compose_config
from ptmlab.contracts import DataError, ProbeSummary

RELEASE = Path(__file__).resolve().parents[1] / "fixtures" / "lama_release" / "data"
FILES = sorted(p for p in RELEASE.rglob("*.jsonl") if p.name != "relations.jsonl")
RECORDS = sum(1 for f in FILES for line in f.read_text().splitlines() if line.strip())


def test_the_fixture_has_the_release_record_shapes():
    for record in map(json.loads, (RELEASE / "TREx" / "P19.jsonl").read_text().splitlines()):
        assert {"sub_label", "obj_label", "predicate_id", "evidences"} <= set(record)
        assert "masked_sentences" not in record and "masked_sentence" in record["evidences"][0]
    for record in map(json.loads, (RELEASE / "Google_RE" / "place_of_birth_test.jsonl").read_text().splitlines()):
        assert record["pred"] == "/people/person/place_of_birth" and record["masked_sentences"]


def test_the_whole_release_folder_reads_with_lamas_conventions():
    data = cloze.read_lama(str(RELEASE))
    assert len(data.facts) == RECORDS
    by = {(f.relation, f.subject or f.sentence): f for f in data.facts}
    assert {f.relation for f in data.facts} == {
        "P19",
        "P36",
        "place_of_birth",
        "place_of_death",
        "date_of_birth",
        "Squad",
    }
    # T-REx: the template, not the evidence's sentence
    assert by["P19", "anna"].sentence == "anna was born in [MASK] ."
    assert by["P36", "germany"].sentence == "the capital of germany is [MASK] ."
    # Google-RE: LAMA's templates for its three relations, not the masked sentences
    assert by["place_of_birth", "mia"].sentence == "mia was born in [MASK] ."
    assert by["place_of_death", "max"].sentence == "max died in [MASK] ."
    assert by["date_of_birth", "anna"].sentence == "anna (born [MASK])."
    # SQuAD: its masked sentences
    squad = sorted(f.sentence for f in data.facts if f.relation == "Squad")
    assert squad == ["atlantis sank near [MASK] .", "the capital of italy is [MASK] ."]
    assert RELEASE / "relations.jsonl" in data.files


@pytest.mark.parametrize("given", ["TREx/P19.jsonl", "TREx"])
def test_relations_jsonl_is_found_above_a_file_or_corpus_folder(given):
    data = cloze.read_lama(str(RELEASE / given))
    assert data.facts and all(
        f.sentence == f"{f.subject} was born in [MASK] ." or f.relation == "P36" for f in data.facts
    )
    assert RELEASE / "relations.jsonl" in data.files


def test_a_named_relations_file_and_a_relation_without_any_template(tmp_path):
    # the failure: T-REx records with no template anywhere and no masked sentence of their own
    corpus = tmp_path / "lama" / "TREx"
    corpus.mkdir(parents=True)
    rows = [json.loads(line) for line in (RELEASE / "TREx" / "P19.jsonl").read_text().splitlines()]
    (corpus / "P19.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "evidences"}) + "\n" for r in rows)
    )
    with pytest.raises(
        DataError, match=r"P19.jsonl:1: no 'masked_sentences' and no template for relation 'P19'"
    ) as err:
        cloze.read_lama(str(corpus / "P19.jsonl"))
    assert "probe.data.relations" in str(err.value)
    # probe.data.relations names a templates file anywhere
    templates = tmp_path / "templates.jsonl"
    templates.write_text('{"relation": "P19", "template": "[X] is from [Y] ."}\n')
    data = cloze.read_lama(str(corpus), relations=str(templates))
    assert data.facts[0].sentence == "anna is from [MASK] ." and templates in data.files
    # no template for the relation: T-REx's first evidence's masked sentence
    (tmp_path / "empty.jsonl").write_text("")
    data = cloze.read_lama(str(RELEASE / "TREx" / "P19.jsonl"), relations=str(tmp_path / "empty.jsonl"))
    assert data.facts[0].sentence == "anna , a painter , grew up in [MASK] and later moved away ."
    with pytest.raises(DataError, match=r"probe.data.relations=.*missing.jsonl: no templates file there"):
        cloze.read_lama(str(corpus), relations=str(tmp_path / "missing.jsonl"))


@pytest.fixture(scope="module")
def tiny_mlm(module_ptmlab_home, tmp_path_factory):
    """bert_tiny pretrained with MLM for a few steps on sentences with the fixture's words (the
    counting is what is checked here; test_probing.py checks P@k by hand on a better-trained one)."""
    from lightning_modules.stages.pretrain import run_pretrain

    rng = random.Random(0)
    people, cities = ["anna", "tom", "mia", "leo", "eva", "max"], ["paris", "rome", "berlin"]
    countries = ["france", "italy", "germany"]
    corpus = tmp_path_factory.mktemp("lama_corpus")
    (corpus / "doc.txt").write_text(
        "\n".join(
            f"{rng.choice(people)} was born in {rng.choice(cities)} . the capital of {rng.choice(countries)} is "
            f"{rng.choice(cities)} . {rng.choice(people)} lives in {rng.choice(cities)} ."
            for _ in range(300)
        )
        + "\n"
    )
    run_dir = tmp_path_factory.mktemp("tiny_mlm") / "run"
    run_pretrain(
        compose_config(
            [
                "stage=pretrain",
                "model=bert_tiny",
                "model.backbone.num_layers=2",
                "objective=mlm",
                "data=text_files",
                f"data.corpus.path={corpus}",
                "data.block_size=32",
                "data.batch_size=16",
                "tokenizer.vocab_size=120",
                "tokenizer.min_frequency=1",
                "trainer.max_steps=20",
                "trainer.limit_val_batches=0",
                "trainer.enable_progress_bar=false",
                "checkpoint_every_n_steps=0",
                f"+run_dir={run_dir}",
            ]
        )
    )
    return run_dir


def test_probe_lama_on_the_release_folder_scores_or_counts_every_fact(tiny_mlm, tmp_path):
    from lightning_modules.stages.probe import run_probe

    cfg = compose_config(
        [
            "stage=probe",
            "model=bert_tiny",
            "probe=lama",
            f"probe.data.path={RELEASE}",
            f"backbone={tiny_mlm}",
            f"+run_dir={tmp_path / 'probe'}",
        ]
    )
    summary = run_probe(cfg)
    ProbeSummary.model_validate(summary)
    (task,) = summary["tasks"]
    relations = {r["relation"]: r for r in task["relations"]}
    assert sum(r["facts"] for r in relations.values()) == RECORDS
    for r in relations.values():
        assert r["scored"] + r["oov"] == r["facts"], r
        assert (r.get("p_at_1") is not None) == (r["scored"] > 0)
    # reykjavikurborg, 1961 and xyzzyplugh are outside a 120-token vocabulary; every other object is scored
    assert {k: r["oov"] for k, r in relations.items()} == {
        "P19": 1,
        "P36": 0,
        "place_of_birth": 0,
        "place_of_death": 0,
        "date_of_birth": 1,
        "Squad": 1,
    }
    assert task["oov"] == 3 and task["scored"] == RECORDS - 3

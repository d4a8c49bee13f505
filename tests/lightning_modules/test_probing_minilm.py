"""Probing the packaged MiniLM on UD English EWT (train on the first 4,000 training sentences,
evaluate on the whole dev file), against the thresholds a plain PyTorch script reached (issue 12):

- UPOS linear probe: best layer >= 0.90; the random-init model's best layer <= 0.78; selectivity
  at the best trained layer >= 0.15 and >= the random-init model's + 0.10;
- distance structural probe (rank 64): best-layer UUAS >= 0.58, best-layer distance Spearman
  >= 0.68 (each at its own best layer), UUAS >= the random-init model's best + 0.15.

One extraction per model for the module (the first job); a second job on the same model and data
does no forward pass; the sentence and attention suites run end to end on a small slice.

PTMLAB_TEST_PROBE_CACHE (unset in CI) names a cache folder kept between local runs: the module
then reads the activations an earlier run extracted instead of extracting them again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lightning_modules.probing import activations
from ptmlab.config import compose_config
from ptmlab.contracts import ProbeSummary

# Extraction of 4,000 + 2,001 sentences by MiniLM and by its random-init twin dominates (CPU).
pytestmark = [pytest.mark.slow, pytest.mark.threshold, pytest.mark.timeout(3600)]

COMMON = ["stage=probe", "model=minilm"]
KEPT_CACHE = os.environ.get("PTMLAB_TEST_PROBE_CACHE")


@pytest.fixture(scope="module")
def home(module_ptmlab_home):
    return module_ptmlab_home


def run(home: Path, name: str, *overrides: str) -> dict:
    from lightning_modules.stages.probe import run_probe

    cache = [f"paths.cache_dir={KEPT_CACHE}"] if KEPT_CACHE else []
    return run_probe(compose_config([*COMMON, *cache, *overrides, f"+run_dir={home / 'runs' / name}"]))


@pytest.fixture(scope="module")
def first(home, data_dir):
    """UPOS + distance probe, 4,000 training sentences, the whole dev file. Token probes train 3
    epochs, not the stage's 6 (half of their fits' cost): over probe seeds 0/1/2 (layers 2-4; random
    init 0, 3, 6) the best UPOS layer scored .9344/.9339/.9349 against .90 (6 epochs, seed 0: .9369),
    random init ≤ .686 against ≤ .78, selectivity at the best layer .337/.342/.381 against random
    init's ≤ .064 + .10. The distance probe keeps its 10 epochs: at 5 (lr 2e-3) the best Spearman
    was .658/.629/.680 against the .68 threshold."""
    return run(
        home,
        "first",
        "probe=upos",
        "probe.tasks=[upos,distance]",
        "probe.data.max_train_sentences=4000",
        "stage.token.epochs=3",
    )


def task(summary: dict, name: str) -> dict:
    return next(t for t in summary["tasks"] if t["probe_task"] == name)


def test_the_summary_keeps_its_contract_and_the_baselines(first):
    ProbeSummary.model_validate(first)
    assert first["probe_task"] == "upos" and first["alignment"] == "first"
    assert first["train_sentences"] == 4000 and first["eval_sentences"] == 2001
    for t in first["tasks"]:
        assert [e["layer"] for e in t["layers"]] == list(range(7))  # embeddings + 6 layers
        assert [e["layer"] for e in t["random_init"]["layers"]] == list(range(7))
        assert t["baselines"]["layer0"] == t["layers"][0][t["metric"]]
        assert t["baselines"]["random_init_best"] == t["random_init"]["best_score"]
    mix = task(first, "upos")["scalar_mix"]
    assert abs(sum(mix["weights"]) - 1) < 1e-3 and mix["selectivity"] == pytest.approx(
        mix["accuracy"] - mix["control_accuracy"], abs=1e-4
    )


def test_upos_linear_probe_thresholds(first):
    upos = task(first, "upos")
    best = max(upos["layers"], key=lambda e: e["accuracy"])
    random_best = max(upos["random_init"]["layers"], key=lambda e: e["accuracy"])
    print("UPOS", [(e["layer"], e["accuracy"], e["selectivity"]) for e in upos["layers"]])
    print("UPOS random init", [(e["layer"], e["accuracy"], e["selectivity"]) for e in upos["random_init"]["layers"]])
    assert best["accuracy"] >= 0.90
    assert random_best["accuracy"] <= 0.78
    assert best["selectivity"] >= 0.15
    assert best["selectivity"] >= random_best["selectivity"] + 0.10
    for e in upos["layers"]:
        assert e["selectivity"] == pytest.approx(e["accuracy"] - e["control_accuracy"], abs=1e-4)
    assert upos["baselines"]["majority"] < 0.25  # NOUN is ~17% of EWT words


def test_distance_structural_probe_thresholds(first):
    distance = task(first, "distance")
    best = max(distance["layers"], key=lambda e: e["uuas"])
    random_best = max(e["uuas"] for e in distance["random_init"]["layers"])
    print("distance", [(e["layer"], e["uuas"], e["spearman"]) for e in distance["layers"]])
    print("distance random init", [(e["layer"], e["uuas"], e["spearman"]) for e in distance["random_init"]["layers"]])
    assert distance["rank"] == 64
    assert best["uuas"] >= 0.58
    # each metric at its own best layer (Hewitt & Manning report both so): on this machine UUAS
    # peaked at layer 2 (.635, Spearman .670) and Spearman at layer 3 (.701, UUAS .632)
    assert max(e["spearman"] for e in distance["layers"]) >= 0.68
    assert best["uuas"] >= random_best + 0.15


def test_the_cache_holds_each_extraction_once_with_its_size(first, home):
    extraction = first["extraction"]
    assert set(extraction) == {"minilm", "random-init"}
    root = Path(KEPT_CACHE or home / "cache") / "activations"
    keys = {d["key"] for model in extraction.values() for d in model["datasets"].values()}
    assert len(keys) == 4  # 2 models × (train, dev)
    assert keys <= {p.name for p in root.iterdir()}
    for key in keys:
        manifest = json.loads((root / key / "manifest.json").read_text())
        shards = sorted((root / key).glob("shard_*.safetensors"))
        assert manifest["complete"] and manifest["num_layers"] == 7 and manifest["hidden_size"] == 384
        assert manifest["size_bytes"] == sum(p.stat().st_size for p in shards) > 0
        assert len(shards) == manifest["shards"]


def test_a_second_job_on_the_same_model_and_data_does_no_forward_pass(first, home):
    passes_before = activations.FORWARD_PASSES["count"]
    # One epoch, no control probe, no scalar mix: this test proves the cache hit, and its one score
    # check holds far apart at that size (XPOS layer 2 over probe seeds 0/1/2: .904/.906/.903,
    # random init .628/.629/.632)
    second = run(
        home,
        "second",
        "probe=xpos",
        "probe.data.max_train_sentences=4000",
        "stage.layers=[2]",
        "stage.token.epochs=1",
        "stage.token.control=false",
        "stage.token.scalar_mix=false",
    )
    assert activations.FORWARD_PASSES["count"] == passes_before  # no backbone forward at all
    for model in ("minilm", "random-init"):
        assert second["extraction"][model]["forward_passes"] == 0
        assert second["extraction"][model]["cache_hits"] == 2
    xpos = task(second, "xpos")
    assert [e["layer"] for e in xpos["layers"]] == [0, 2]  # layer 0 always comes along
    assert xpos["layers"][1]["accuracy"] > xpos["random_init"]["layers"][1]["accuracy"]


def test_sentence_and_attention_suites_run_on_minilm(home, data_dir):
    small = ["probe.data.max_train_sentences=300", "probe.data.max_eval_sentences=120", "stage.token.epochs=3"]
    sentence = run(home, "sentence", "probe=sentence", *small)
    ProbeSummary.model_validate(sentence)
    length = task(sentence, "sentence_length")
    assert max(e["accuracy"] for e in length["layers"]) > length["baselines"]["majority"]
    attention = run(home, "attention", "probe=attention", *small, "stage.attention.max_sentences=60")
    (result,) = attention["tasks"]
    stats = {h["statistic"]: h["values"] for h in result["heatmaps"]}
    assert len(stats["entropy"]) == 6 and len(stats["entropy"][0]) == 12  # MiniLM: 6 layers × 12 heads
    # Clark et al.: some head finds determiners' heads far better than a random-init model's
    assert result["best_heads"]["det"]["accuracy"] > 0.5
    assert result["random_init"]["best_heads"]["det"]["accuracy"] < result["best_heads"]["det"]["accuracy"]


def test_geometry_reads_the_cache_and_finds_the_upper_layers_more_contextual(first, home):
    """Ethayarajh (2019) on the whole dev file the first job extracted (no forward pass): MiniLM's
    self-similarity less the anisotropy falls from the embeddings to its most contextual layer by
    far more than the random-init twin's, which no training made contextual (figures:
    docs/guide/probing.md)."""
    passes_before = activations.FORWARD_PASSES["count"]
    geometry = run(home, "geometry", "probe=geometry")
    assert activations.FORWARD_PASSES["count"] == passes_before
    ProbeSummary.model_validate(geometry)
    self_sim = task(geometry, "self_similarity")
    assert self_sim["word_types"] > 300

    def drop(layers: list[dict]) -> float:
        adjusted = [e["self_similarity_adjusted"] for e in layers]
        return adjusted[0] - min(adjusted)

    assert drop(self_sim["layers"]) >= 0.2
    assert drop(self_sim["random_init"]["layers"]) < 0.1
    anisotropy = task(geometry, "anisotropy")
    assert all(-1.0 <= e["anisotropy"] <= 1.0 for e in anisotropy["layers"])

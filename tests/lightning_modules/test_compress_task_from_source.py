"""stage=compress takes its task from the source (issue 21, item 6): a fine-tuned task model's
manifest records its task config, so `task=` may be left out; the compressed model records it
too (methods chain without `task=`); a `task=` for another task is refused in one line naming
both, before any run folder; a task model saved before
manifests recorded the task falls back to its run's config.yaml, and without either the
message says to give `task=`."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ptmlab.errors import ConfigError

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
QUICK = [
    "stage.measure.repeats=1",
    "stage.measure.warmup=0",
    "stage.measure.batch_sizes=[1]",
    "stage.measure.threads=[1]",
]


@pytest.fixture(scope="module")
def home(module_ptmlab_home):
    return module_ptmlab_home


@pytest.fixture(scope="module")
def source(home, data_dir, tmp_path_factory):
    """A tiny model fine-tuned on the first 24 SST-2 rows (its run folder)."""
    from lightning_modules.stages.finetune import run_finetune
    from ptmlab.config import compose_config

    corpus = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    (corpus / "doc.txt").write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(6)) for _ in range(100)) + "\n")
    run_dir = tmp_path_factory.mktemp("source") / "run"
    run_finetune(
        compose_config(
            [
                "stage=finetune",
                *TINY,
                "data=text_files",
                f"data.corpus.path={corpus}",
                "task=glue/sst2",
                "task.max_train_samples=24",
                "task.max_eval_samples=16",
                "task.max_length=24",
                "stage.epochs=1",
                "stage.batch_size=8",
                f"+run_dir={run_dir}",
            ]
        )
    )
    return run_dir


def test_the_manifest_records_the_task_config(source):
    manifest = json.loads((source / "export" / "task_model" / "task_model.json").read_text())
    node = manifest["task_configs"]["sst2"]
    assert node["name"] == "sst2" and node["max_train_samples"] == 24
    assert node["data"]["data_dir"] == "${paths.data_dir}/glue"  # unresolved: follows the machine that loads it


def test_compress_without_task_runs_and_records_the_task(home, source, tmp_path):
    """In process, as ptmlab.run composes and calls the stage (its exit statuses: test_compression.py)."""
    from lightning_modules.stages.compress import run_compress
    from ptmlab.config import compose_config

    run_dir = tmp_path / "quantized"
    run_compress(
        compose_config(
            ["stage=compress", *QUICK, "compression=quantize_dynamic", f"source={source}", f"+run_dir={run_dir}"]
        )
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (
        summary["task"] == "sst2"
        and summary["main_metric"] == "accuracy"
        and summary["compressed"]["score"] is not None
    )
    # the stored config says which task ran, with the source's subset (what the head was trained on)
    ran = OmegaConf.load(run_dir / "config.yaml")
    assert ran.task.name == "sst2" and ran.task.max_train_samples == 24 and ran.task.max_eval_samples == 16
    assert list(ran.task.labels) == ["0", "1"]
    # the compressed model records the task too, so the next method needs no task= either
    manifest = json.loads((run_dir / "export" / "task_model" / "task_model.json").read_text())
    assert manifest["task_configs"]["sst2"]["name"] == "sst2"
    # the stored config, the summary and the MLflow params say which model ran: the source's
    # (hidden size 32, its tokenizer's vocabulary), not the composed bert_tiny defaults
    source_summary = json.loads((source / "summary.json").read_text())
    assert (
        ran.model.backbone.hidden_size == 32
        and ran.model.backbone.vocab_size == source_summary["backbone"]["vocab_size"]
    )
    assert summary["hparams"]["model.backbone.hidden_size"] == 32 and summary["hparams"]["stage.name"] == "compress"
    assert summary["model"] == source_summary["model"] and summary["family"] == source_summary["family"]
    assert summary["objective"] == source_summary["objective"] and summary["backbone"] == source_summary["backbone"]
    import mlflow

    params = (
        mlflow.MlflowClient(str(OmegaConf.select(ran, "tracking.uri"))).get_run(summary["mlflow_run_id"]).data.params
    )
    assert params["model.backbone.hidden_size"] == "32" and params["resolved_backbone.vocab_size"] == str(
        source_summary["backbone"]["vocab_size"]
    )


def test_a_classification_fine_tune_records_its_confusion_baseline_and_params(source, data_dir):
    """The confusion matrix, per-class scores and most confident mistakes, stored with the run and
    in the summary; the majority-class baseline in the main metric; the flat resolved config."""
    summary = json.loads((source / "summary.json").read_text())
    stored = json.loads((source / "predictions" / "confusion.json").read_text())
    assert summary["confusion"] == stored and stored["labels"] == ["0", "1"] and stored["examples"] == 16
    matrix = stored["matrix"]
    assert sum(map(sum, matrix)) == 16 and stored["errors"] == 16 - matrix[0][0] - matrix[1][1]
    correct = (matrix[0][0] + matrix[1][1]) / 16
    assert abs(correct - summary["metrics"]["accuracy"]) < 1e-9
    recall_0 = matrix[0][0] / max(1, matrix[0][0] + matrix[0][1])
    assert abs(stored["per_class"][0]["recall"] - recall_0) < 1e-9 and stored["per_class"][0]["support"] == sum(
        matrix[0]
    )
    assert len(stored["misclassified"]) == min(20, stored["errors"])
    scores = [m["score"] for m in stored["misclassified"]]
    assert scores == sorted(scores, reverse=True) and all(m["gold"] != m["predicted"] for m in stored["misclassified"])
    # the training rows' most frequent class, predicted for every eval row (its row of the matrix: gold)
    train = [
        int(line.rsplit("\t", 1)[1])
        for line in (data_dir / "glue" / "SST-2" / "train.tsv").read_text().splitlines()[1:25]
    ]
    majority = sum(matrix[max((0, 1), key=lambda c: (train.count(c), -c))]) / 16
    assert summary["baseline"] == {"kind": "majority_class", "metric": summary["main_metric"], "value": majority}
    assert summary["hparams"]["task.max_train_samples"] == 24 and summary["hparams"]["stage.batch_size"] == 8
    assert not any(key.startswith(("paths.", "tracking.")) or key == "seed" for key in summary["hparams"])


def test_a_task_other_than_the_sources_is_refused_naming_both(home, source, tmp_path):
    """In process: a ConfigError is exit 2 at the entry point (test_compression.py checks that path)."""
    from lightning_modules.stages.compress import build_compress
    from ptmlab.config import compose_config

    cfg = compose_config(
        [
            "stage=compress",
            "compression=quantize_dynamic",
            "task=glue/mrpc",
            f"source={source}",
            f"+run_dir={tmp_path / 'refused'}",
            *QUICK,
        ]
    )
    with pytest.raises(ConfigError) as err:
        build_compress(cfg)
    message = str(err.value)
    assert "task=mrpc" in message and "(sst2)" in message and "\n" not in message
    assert not (tmp_path / "refused").exists()


def _copy_without_task_configs(source: Path, dest: Path, keep_run_config: bool) -> Path:
    shutil.copytree(source / "export" / "task_model", dest / "export" / "task_model")
    if keep_run_config:
        shutil.copy(source / "config.yaml", dest / "config.yaml")
    path = dest / "export" / "task_model" / "task_model.json"
    manifest = json.loads(path.read_text())
    del manifest["task_configs"]  # as written before manifests recorded the task
    path.write_text(json.dumps(manifest))
    return dest


def test_older_task_models_take_the_task_from_their_run_config(home, source, tmp_path):
    from lightning_modules.stages.compress import build_compress
    from ptmlab.config import compose_config

    old = _copy_without_task_configs(source, tmp_path / "old", keep_run_config=True)
    cfg = compose_config(["stage=compress", "compression=quantize_dynamic", f"source={old}", *QUICK])
    parts = build_compress(cfg)
    assert parts.task.spec.name == "sst2" and len(parts.task.train.examples) == 24

    bare = _copy_without_task_configs(source, tmp_path / "bare", keep_run_config=False)
    cfg = compose_config(["stage=compress", "compression=quantize_dynamic", f"source={bare}", *QUICK])
    with pytest.raises(ConfigError, match=r"records no config for task sst2.*give task=") as err:
        build_compress(cfg)
    assert "\n" not in str(err.value)
    # naming the task works for such a model, and a wrong label order is refused naming both
    parts = build_compress(
        compose_config(
            [
                "stage=compress",
                "compression=quantize_dynamic",
                f"source={bare}",
                "task=glue/sst2",
                "task.max_train_samples=8",
                *QUICK,
            ]
        )
    )
    assert len(parts.task.train.examples) == 8
    with pytest.raises(ConfigError, match=r"task.labels=\['1', '0'\] differ from the labels of source="):
        build_compress(
            compose_config(
                [
                    "stage=compress",
                    "compression=quantize_dynamic",
                    f"source={bare}",
                    "task=glue/sst2",
                    "task.labels=[1,0]",
                    *QUICK,
                ]
            )
        )


def test_a_probe_of_a_task_model_records_the_backbone_its_source_fine_tuned(home, source, tmp_path):
    """The probe stage's config (config.yaml, MLflow params) and summary fields say what the
    fine-tuned model's backbone is: its model node (hidden size 32), its objective, tokenizer and
    corpus from the source's record, the fine-tune as the run that made it; not bert_tiny's
    composed defaults nor "unknown"."""
    from lightning_modules.artifacts.backbone_reference import backbone_summary, record_backbone
    from lightning_modules.stages.probe import resolve_probe_backbone
    from ptmlab.config import compose_config

    cfg = compose_config(["stage=probe", "probe=upos", f"backbone={source}", f"+run_dir={tmp_path / 'probe'}"])
    assert cfg.model.backbone.hidden_size != 32  # the composed default
    resolved = resolve_probe_backbone(cfg)
    record_backbone(cfg, resolved)
    recorded = json.loads((source / "summary.json").read_text())
    assert cfg.model.name == "bert_tiny" and cfg.model.backbone.hidden_size == 32
    assert cfg.objective.name == recorded["objective"] and cfg.tokenizer.name == recorded["tokenizer"]
    assert cfg.data.name == recorded["backbone"]["data"] == "text_files"
    assert cfg.resolved_backbone.source_stage == "finetune" and cfg.resolved_backbone.reference == str(source)
    assert cfg.resolved_backbone.source_run == recorded["mlflow_run_id"]
    fields = backbone_summary(resolved)
    assert fields["family"] == recorded["family"] and fields["tokenizer"] == recorded["tokenizer"]

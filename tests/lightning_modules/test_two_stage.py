"""Two-stage transfer: fine-tune on an intermediate task with `stage.export_backbone=true`, then
fine-tune on the target with `backbone=<run folder>`; the target starts from the intermediate
run's fine-tuned encoder, not from a fresh initialisation."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from ptmlab import queue

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WORDS = "the a man woman dog is not was in on park city good some people".split()


@pytest.fixture()
def one_torch_thread():
    """Intra-op threads spin against other processes on the shared 2-core CI machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_two_stage_pipeline_expands_to_intermediate_then_target():
    jobs = {job.name: job for job in queue.expand_pipeline("two_stage")}
    assert list(jobs) == ["intermediate-mnli", "target-rte", "rte-direct"]
    first, target, control = jobs.values()
    assert first.stage == target.stage == "finetune"
    assert "task=glue/mnli" in first.overrides and "stage.export_backbone=true" in first.overrides
    assert "task=glue/rte" in target.overrides and "backbone=job:intermediate-mnli" in target.overrides
    assert target.depends_on == ["intermediate-mnli"]
    assert control.depends_on == [] and not any(o.startswith("backbone=") for o in control.overrides)


def test_target_starts_from_the_intermediate_fine_tuned_encoder(ptmlab_home, tmp_path, one_torch_thread):
    import lightning.pytorch as pl

    from lightning_modules.artifacts.backbone_reference import resolve_backbone
    from lightning_modules.runtime.stage_run import tracking_uri
    from lightning_modules.stages.finetune import run_finetune
    from ptmlab.config import compose_config

    rng = random.Random(0)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "doc.txt").write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(8)) for _ in range(100)))
    common = [
        "stage=finetune",
        "model=bert_tiny",
        "data=text_files",
        f"data.corpus.path={corpus}",
        "tokenizer.vocab_size=90",
        "tokenizer.min_frequency=1",
        f"paths.data_dir={FIXTURES}",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        "stage.lr=1e-3",
        "seed=3",
    ]
    intermediate = tmp_path / "mnli"
    # the MNLI fixture has 7 training rows: one step per epoch, so last.ckpt holds the final weights
    cfg_a = compose_config(
        [
            *common,
            "task=glue/mnli",
            "stage.batch_size=7",
            "stage.epochs=5",
            "stage.max_steps=5",
            "stage.export_backbone=true",
            f"+run_dir={intermediate}",
        ]
    )
    summary_a = run_finetune(cfg_a)
    assert summary_a["steps"] == 5 and (intermediate / "export" / "ptmlab_model.yaml").is_file()
    checkpoint = torch.load(intermediate / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert checkpoint["global_step"] == 5
    fine_tuned = {
        k[len("model.backbone.") :]: v for k, v in checkpoint["state_dict"].items() if k.startswith("model.backbone.")
    }

    cfg_b = compose_config(
        [
            *common,
            "task=glue/rte",
            "stage.batch_size=4",
            "stage.max_steps=2",
            f"backbone={intermediate}",
            f"+run_dir={tmp_path / 'rte'}",
        ]
    )
    loaded = resolve_backbone(cfg_b, tracking_uri(cfg_b))
    state = loaded.backbone.state_dict()
    assert set(state) == set(fine_tuned)
    for name, value in state.items():
        assert torch.equal(value, fine_tuned[name]), name
    pl.seed_everything(3, verbose=False)
    fresh = resolve_backbone(cfg_a, tracking_uri(cfg_a))  # what the intermediate run started from
    changed = {name for name, value in fresh.backbone.state_dict().items() if not torch.equal(value, state[name])}
    assert "embeddings.word_embeddings.weight" in changed and len(changed) > len(state) // 2
    assert loaded.tokenizer.get_vocab() == fresh.tokenizer.get_vocab()

    summary_b = run_finetune(cfg_b)
    assert summary_b["task"] == "rte" and summary_b["backbone_source"] == str(intermediate)
    assert summary_b["model"] == "bert_tiny" and summary_b["steps"] == 2
    assert 0.0 <= summary_b["main_score"] <= 1.0

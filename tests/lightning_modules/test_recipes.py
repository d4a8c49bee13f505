"""Recipes (conf/recipe/, ptmlab.recipes): each task family and regime starts from its field's
hyper-parameters, a key the user sets beats the recipe, and a run records where each value came
from and warns on unusual ones."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from ptmlab.config import compose_config
from ptmlab.contracts.recipes import effective_recipe, recipe_warnings
from ptmlab.errors import ConfigError
from ptmlab.queue.varied_keys import keys_that_differ
from ptmlab.recipes import SWEPT_KEYS_ENV

MINILM = ["stage=finetune", "model=minilm"]


def values(cfg) -> dict:
    return {key: (v["value"], v["origin"]) for key, v in effective_recipe(cfg)["values"].items()}


@pytest.mark.parametrize(
    ("overrides", "recipe"),
    [
        ([*MINILM, "task=glue/rte"], "sequence_classification"),
        ([*MINILM, "task=glue/stsb"], "regression"),
        ([*MINILM, "task=ner/wnut17"], "token_classification"),
        ([*MINILM, "task=squad/v1"], "span_extraction"),
        ([*MINILM, "task=superglue/copa"], "multiple_choice"),
        ([*MINILM, "task=glue/sst2", "adaptation=prompt_finetune"], "prompt_few_shot"),
        ([*MINILM, "task=glue/sst2", "adaptation=prompt_tuning"], "sequence_classification"),
        (["stage=finetune", "model=t5_tiny", "objective=span_corruption", "task=seq2seq"], None),
        (["stage=finetune", "model=bert_tiny", "task=glue/rte"], "sequence_classification+from_scratch"),
        ([*MINILM, "task=glue/rte", "backbone=random"], "sequence_classification+from_scratch"),
        ([*MINILM, "task=ner/wnut17", "backbone=job:1"], "token_classification"),
        (["stage=pretrain"], "none"),
    ],
)
def test_auto_picks_the_recipe_of_the_task_family_and_regime(overrides, recipe):
    cfg = compose_config(overrides)
    record = effective_recipe(cfg)
    expected = recipe or "generation_encoder_decoder+from_scratch"
    assert record["name"] == expected and record["requested"] == "auto"


def test_the_recipe_sets_what_the_user_did_not_and_an_override_beats_it():
    ner = compose_config([*MINILM, "task=ner/wnut17"])
    assert (ner.stage.batch_size, ner.stage.lr, ner.scheduler.warmup_ratio) == (16, 5e-5, 0.1)
    assert list(ner.optimizer.betas) == [0.9, 0.999]
    assert values(ner)["stage.batch_size"] == (16, "recipe:token_classification")

    mine = compose_config([*MINILM, "task=ner/wnut17", "stage.batch_size=4", "++optimizer.eps=1e-7"])
    assert (mine.stage.batch_size, mine.optimizer.eps) == (4, 1e-7)
    assert values(mine)["stage.batch_size"] == (4, "override")
    assert values(mine)["optimizer.eps"] == (1e-7, "override")
    assert values(mine)["stage.lr"] == (5e-5, "recipe:token_classification")
    # the value the user gives equals the recipe's: still the user's
    same = compose_config([*MINILM, "task=ner/wnut17", "stage.lr=5e-5"])
    assert values(same)["stage.lr"] == (5e-5, "override")


def test_from_scratch_raises_the_rate_and_a_chosen_recipe_or_none_applies_whatever_the_task():
    scratch = compose_config(["stage=finetune", "model=bert_tiny", "task=glue/rte"])
    assert scratch.stage.lr == 1e-3 and values(scratch)["stage.lr"] == (
        1e-3,
        "recipe:sequence_classification+from_scratch",
    )
    chosen = compose_config([*MINILM, "task=glue/rte", "recipe=token_classification"])
    assert effective_recipe(chosen)["requested"] == "token_classification" and chosen.stage.batch_size == 16
    none = compose_config([*MINILM, "task=glue/rte", "recipe=none"])
    assert effective_recipe(none) == {"name": "none", "requested": "none", "values": {}}
    assert (none.stage.lr, none.stage.batch_size) == (5e-5, 32)  # conf/stage/finetune.yaml's own
    # a scheduler without warm-up: the recipe's warm-up does not apply, and nothing fails
    constant = compose_config([*MINILM, "task=ner/wnut17", "scheduler=cosine"])
    assert "stage.lr" in values(constant)


def test_an_unknown_recipe_or_a_forged_record_is_one_line():
    with pytest.raises(ConfigError, match=r"recipe/nope.*available: auto"):
        compose_config([*MINILM, "task=glue/rte", "recipe=nope"])
    with pytest.raises(ConfigError, match=r"recipe.origin is what ptmlab records"):
        compose_config([*MINILM, "task=glue/rte", "+recipe.origin={}"])
    with pytest.raises(ConfigError, match=r"recipe=token_classification: a recipe sets a fine-tune's training"):
        compose_config(["stage=pretrain", "recipe=token_classification"])


def test_a_key_a_sweep_varies_is_named_sweep(monkeypatch):
    monkeypatch.setenv(SWEPT_KEYS_ENV, "stage.lr,seed")
    cfg = compose_config([*MINILM, "task=ner/wnut17", "stage.lr=1e-4", "stage.batch_size=8"])
    assert values(cfg)["stage.lr"] == (1e-4, "sweep")
    assert values(cfg)["stage.batch_size"] == (8, "override")


def test_the_keys_a_sweep_of_explicit_jobs_varies():
    jobs = [["task=glue/rte", "stage.lr=1e-4", "seed=1"], ["task=glue/rte", "stage.lr=3e-4", "seed=1", "+x=1"]]
    assert keys_that_differ(jobs) == ["stage.lr", "x"]


def test_the_warnings_fire_on_few_steps_a_fine_tuning_rate_from_scratch_and_a_batch_as_large_as_the_data():
    scratch = compose_config(["stage=finetune", "model=bert_tiny", "task=glue/rte", "stage.lr=5e-5"])
    lines = recipe_warnings(scratch, train_rows=160, optimizer_steps=20, effective_batch=32)
    assert len(lines) == 3, lines
    assert lines[0].startswith("20 optimizer steps") and "stage.lr=5e-05" in lines[1] and "tenth" in lines[2]
    pretrained = compose_config([*MINILM, "task=glue/rte"])
    assert recipe_warnings(pretrained, train_rows=2490, optimizer_steps=234, effective_batch=32) == []


def test_a_twenty_step_fine_tune_from_scratch_records_its_recipe_and_warns(ptmlab_home, tmp_path, caplog):
    """The run as a researcher starts it: its summary names the recipe and each value's origin,
    the config it stored holds `recipe.origin`, and the two warnings are in the log and the summary."""
    import torch

    from lightning_modules.stages.finetune import run_finetune

    torch.set_num_threads(1)
    cfg = compose_config(
        [
            "stage=finetune",
            "model=bert_tiny",
            "task=demo/sentiment",
            "task.max_train_samples=160",
            "task.max_eval_samples=32",
            "stage.batch_size=8",
            "stage.epochs=1",
            "stage.lr=5e-5",
            "stage.write_predictions=false",
            "trainer.enable_progress_bar=false",
            "checkpoint_every_n_steps=0",
            f"+run_dir={tmp_path / 'run'}",
        ]
    )
    with caplog.at_level("WARNING"):
        run_finetune(cfg)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 20
    recipe = summary["recipe"]
    assert recipe["name"] == "sequence_classification+from_scratch"
    assert recipe["values"]["stage.lr"] == {"value": 5e-5, "origin": "override"}
    assert recipe["values"]["stage.batch_size"] == {"value": 8, "origin": "override"}
    assert recipe["values"]["scheduler.warmup_ratio"] == {
        "value": 0.1,
        "origin": "recipe:sequence_classification+from_scratch",
    }
    assert [w.split(" ")[0] for w in summary["warnings"]] == ["20", "stage.lr=5e-05"]
    assert sum("recipe: " in r.getMessage() for r in caplog.records) == 2
    # one flattening: the MLflow params hold every key of the summary's `hparams`, written the same
    from mlflow.tracking import MlflowClient

    params = MlflowClient(f"sqlite:///{ptmlab_home / 'mlflow.db'}").get_run(summary["mlflow_run_id"]).data.params
    assert {k: params.get(k) for k in summary["hparams"]} == {k: str(v) for k, v in summary["hparams"].items()}
    assert params["recipe.origin.stage.lr"] == "override" and params["seed"] == "42"
    assert params["recipe.name"] == "sequence_classification+from_scratch"
    stored = OmegaConf.load(tmp_path / "run" / "config.yaml")
    assert stored.recipe.origin["stage.epochs"] == "override"
    assert stored.recipe.origin["optimizer.eps"] == "recipe:sequence_classification+from_scratch"

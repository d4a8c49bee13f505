"""Multi-task fine-tuning (MT-DNN style): the task sampler's proportions and determinism."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from lightning_modules.tasks.sampling import TaskSampler, sampling_probabilities, temperature_for
from ptmlab.errors import ConfigError

SIZES = {"mnli": 8000, "sst2": 1600, "rte": 400}
DRAWS = 20_000


def empirical(sampler: TaskSampler, n: int = DRAWS) -> dict[str, float]:
    counts = Counter(sampler.iterate(n))
    return {name: counts[name] / n for name in sampler.names}


def test_proportional_sampling_matches_dataset_sizes():
    total = sum(SIZES.values())
    expected = {name: n / total for name, n in SIZES.items()}  # 0.8, 0.16, 0.04
    sampler = TaskSampler(SIZES, temperature=temperature_for("proportional"), seed=3)
    assert sampler.probabilities == pytest.approx(expected)
    for name, share in empirical(sampler).items():
        assert abs(share - expected[name]) < 0.02, (name, share, expected[name])


def test_temperature_two_flattens_towards_uniform():
    roots = {name: math.sqrt(n) for name, n in SIZES.items()}
    expected = {name: r / sum(roots.values()) for name, r in roots.items()}  # ≈ 0.59, 0.27, 0.13
    sampler = TaskSampler(SIZES, temperature=temperature_for("temperature", 2.0), seed=4)
    assert sampler.probabilities == pytest.approx(expected)
    assert sampler.probabilities["rte"] > SIZES["rte"] / sum(SIZES.values())
    for name, share in empirical(sampler).items():
        assert abs(share - expected[name]) < 0.02, (name, share, expected[name])


def test_uniform_and_huge_sizes():
    assert sampling_probabilities(SIZES, math.inf) == pytest.approx({n: 1 / 3 for n in SIZES})
    # n^(1/T) with tiny T would overflow without log-space
    probs = sampling_probabilities({"a": 10**9, "b": 10**8}, temperature=0.01)
    assert probs["a"] == pytest.approx(1.0) and math.isfinite(probs["b"])


def test_sampler_is_deterministic_per_seed():
    a = TaskSampler(SIZES, seed=7).draw(500)
    assert a == TaskSampler(SIZES, seed=7).draw(500)
    assert a == TaskSampler(SIZES, seed=7).draw(500)  # iterate() restarts from the seed
    assert a != TaskSampler(SIZES, seed=8).draw(500)
    assert len(a) == 500 and set(a) == set(SIZES)


@pytest.mark.parametrize(
    ("sizes", "temperature", "mode", "fragment"),
    [
        ({}, 1.0, "proportional", "at least one task"),
        ({"rte": 0}, 1.0, "proportional", "task rte has 0"),
        ({"rte": 3}, -1.0, "temperature", "stage.temperature=-1.0"),
        ({"rte": 3}, 1.0, "annealed", "stage.sampling=annealed"),
    ],
)
def test_bad_sampling_config_is_one_line(sizes, temperature, mode, fragment):
    with pytest.raises(ConfigError, match=fragment):
        sampling_probabilities(sizes, temperature_for(mode, temperature))


# -- the stage, in process, with a tiny random BERT on real GLUE subsets ----------------------
WORDS = "the a film movie was good bad great awful is not it very and of to sat on".split()


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    import random

    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("corpus")
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))) for _ in range(200)]
    (folder / "doc.txt").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture()
def one_torch_thread():
    """On the shared 2-core CI machine, intra-op threads spin against other processes: a tiny
    model steps ~10x faster on one thread."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_overrides(corpus) -> list[str]:
    return [
        "model=bert_tiny",
        "data=text_files",
        f"data.corpus.path={corpus}",
        "tokenizer.vocab_size=90",
        "tokenizer.min_frequency=1",
        "trainer.enable_progress_bar=false",
        "trainer.log_every_n_steps=5",
        "checkpoint_every_n_steps=0",
    ]


def test_multitask_stage_trains_every_task_in_proportion(
    data_dir, ptmlab_home, tiny_corpus, tmp_path, one_torch_thread
):
    from mlflow.tracking import MlflowClient

    from lightning_modules.stages.multitask import run_multitask
    from ptmlab.config import compose_config

    steps, seed = 40, 5
    cfg = compose_config(
        [
            "stage=multitask",
            *tiny_overrides(tiny_corpus),
            "stage.tasks=[glue/sst2,glue/rte]",
            f"stage.max_steps={steps}",
            "stage.batch_size=8",
            "stage.lr=1e-3",
            "stage.max_train_samples=64",
            "stage.max_eval_samples=24",
            "+stage.task_overrides.rte.max_train_samples=16",
            f"seed={seed}",
            f"+run_dir={tmp_path / 'run'}",
        ]
    )
    summary = run_multitask(cfg)

    assert summary["task"] == "sst2+rte" and summary["adaptation"] == "multitask"
    assert summary["train_sizes"] == {"sst2": 64, "rte": 16}
    assert summary["sampling_probabilities"] == pytest.approx({"sst2": 0.8, "rte": 0.2})
    # every step trained the task the sampler drew for it, so the split is the sampler's
    drawn = Counter(TaskSampler({"sst2": 64, "rte": 16}, temperature=1.0, seed=seed).draw(steps))
    assert summary["task_steps"] == dict(drawn) and summary["steps"] == steps
    assert 0 < summary["task_steps"]["rte"] < summary["task_steps"]["sst2"]
    for task in ("sst2", "rte"):
        assert 0.0 <= summary["task_metrics"][task]["accuracy"] <= 1.0
    assert summary["metrics"] == summary["task_metrics"]["sst2"]
    assert summary["main_score"] == summary["metrics"]["accuracy"]
    assert summary["trainable_params"] == summary["total_params"]
    # each task's confusion over its 24 eval rows and its majority-class baseline; the first task's is the run's
    for task in ("sst2", "rte"):
        confusion = summary["task_confusion"][task]
        assert confusion["examples"] == 24 and sum(map(sum, confusion["matrix"])) == 24
        wrong = round((1 - summary["task_metrics"][task]["accuracy"]) * 24)
        assert confusion["errors"] == wrong
        assert (
            summary["task_baselines"][task]["metric"] == "accuracy" and 0 < summary["task_baselines"][task]["value"] < 1
        )
    assert summary["confusion"] == summary["task_confusion"]["sst2"]
    assert summary["baseline"] == {**summary["task_baselines"]["sst2"], "metric": summary["main_metric"]}

    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["task_metrics"] == summary["task_metrics"]
    run = MlflowClient(tracking_uri=f"sqlite:///{ptmlab_home / 'mlflow.db'}").get_run(on_disk["mlflow_run_id"])
    for key in ("val/sst2/accuracy", "val/rte/accuracy", "train/sst2/loss", "train/rte/loss"):
        assert key in run.data.metrics, key
    assert run.data.metrics["val/rte/accuracy"] == pytest.approx(summary["task_metrics"]["rte"]["accuracy"])


def test_resume_goes_on_with_the_task_sequence_where_it_stopped(
    data_dir, ptmlab_home, tiny_corpus, tmp_path, one_torch_thread, monkeypatch
):
    """A 10-step run crashes in step 4 (checkpoints every step); resumed, the new process trains
    exactly the tasks drawn for steps 3..9, not the first 7 draws again."""
    from lightning_modules.stages.multitask import MultiTaskModule, run_multitask
    from ptmlab.config import compose_config

    seed, sizes = 3, {"sst2": 32, "rte": 16}
    full = TaskSampler(sizes, temperature=1.0, seed=seed).draw(10)
    assert Counter(full[3:]) != Counter(full[:7])  # otherwise this test could not tell them apart
    overrides = [o for o in tiny_overrides(tiny_corpus) if not o.startswith("checkpoint_every_n_steps")]
    cfg = compose_config(
        [
            "stage=multitask",
            *overrides,
            "stage.tasks=[glue/sst2,glue/rte]",
            "stage.max_steps=10",
            "stage.batch_size=4",
            "stage.max_train_samples=32",
            "stage.max_eval_samples=8",
            "+stage.task_overrides.rte.max_train_samples=16",
            f"seed={seed}",
            "checkpoint_every_n_steps=1",
            f"+run_dir={tmp_path / 'run'}",
        ]
    )

    train_step = MultiTaskModule.training_step

    def crash_in_step_4(self, batch, batch_idx):
        if self.global_step == 3:
            raise RuntimeError("simulated crash")
        return train_step(self, batch, batch_idx)

    monkeypatch.setattr(MultiTaskModule, "training_step", crash_in_step_4)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_multitask(cfg)
    monkeypatch.setattr(MultiTaskModule, "training_step", train_step)
    cfg.resume = True
    resumed = run_multitask(cfg)
    assert resumed["steps"] == 10
    assert {t: n for t, n in resumed["task_steps"].items() if n} == dict(Counter(full[3:]))


@pytest.mark.parametrize(("override", "fragment"), [("stage.sampling=annealed", "stage.sampling=annealed is unknown")])
def test_multitask_bad_input_fails_before_any_run(data_dir, ptmlab_home, tmp_path, override, fragment):
    from lightning_modules.stages.multitask import run_multitask
    from ptmlab.config import compose_config

    cfg = compose_config(["stage=multitask", override, "stage.max_train_samples=4", f"+run_dir={tmp_path / 'run'}"])
    with pytest.raises(ConfigError, match=fragment):
        run_multitask(cfg)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("stage.tasks=[glue/sst2,glue/nope]", "stage.tasks: unknown task 'glue/nope'"),
        ("stage.tasks=[glue/sst2,glue/sst2]", "two tasks are named 'sst2'"),
        ("stage.tasks=[]", "stage.tasks is empty"),
        ("stage.tasks=[glue/sst2,../../pyproject]", "'../../pyproject' is not a task config name"),
        ("+stage.task_overrides.cola.max_train_samples=3", "stage.task_overrides.cola: not a task of this run"),
        ("+stage.task_overrides.rte.main_metric=f1", r"stage.tasks\[rte\].main_metric=f1 is not one of"),
    ],
)
def test_multitask_task_list_is_checked_at_compose_time(override, fragment):
    """Composing checks it (torch-free, as the API does on a submission): a bad `stage.tasks`
    never reaches a worker."""
    from ptmlab.config import compose_config

    compose_config(["stage=multitask"])
    with pytest.raises(ConfigError, match=fragment):
        compose_config(["stage=multitask", override])


def test_stream_cycles_each_task_loader_in_order():
    from lightning_modules.stages.multitask import SampledTaskBatches

    sampler = TaskSampler({"a": 3, "b": 1}, seed=11)
    loaders = {"a": ["a0", "a1", "a2"], "b": ["b0"]}  # any re-iterable works as a loader
    stream = list(SampledTaskBatches(loaders, sampler, 50))
    assert [task for task, _ in stream] == sampler.draw(50)
    for task, items in loaders.items():
        seen = [batch for t, batch in stream if t == task]
        assert seen == [items[i % len(items)] for i in range(len(seen))]  # a new epoch when one runs out


def test_a_step_on_one_task_trains_the_encoder_and_only_that_task_head(ptmlab_home, tmp_path):
    """Regression (STS-B, MSE on a 1-unit head) next to classification (RTE, CE), on the fixtures."""
    import torch

    from lightning_modules.heads.multitask_model import MultiTaskModel
    from lightning_modules.models.transformer import TransformerEncoder
    from lightning_modules.stages.multitask import MultiTaskModule, load_tasks
    from ptmlab.config import compose_config

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    cfg = compose_config(["stage=multitask", "stage.tasks=[glue/stsb,glue/rte]", f"paths.data_dir={fixtures}"])
    tasks = load_tasks(cfg)
    assert [tasks[t].num_labels for t in tasks] == [1, 2] and tasks["stsb"].spec.is_regression
    torch.manual_seed(0)
    backbone = TransformerEncoder(
        vocab_size=40, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_position_embeddings=16
    )
    model = MultiTaskModel(backbone, {t: tasks[t].num_labels for t in tasks}, pooling="mean", head_dropout=0.0)
    module = MultiTaskModule(model, tasks, [], cfg.optimizer, None, lr=0.1, total_steps=1)
    ids = torch.randint(5, 40, (4, 8))
    batch = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": torch.zeros_like(ids),
        "pool_index": torch.zeros(4, dtype=torch.long),
        "labels": torch.tensor([0.5, 4.0, 2.5, 1.0]),
    }
    logits = model("stsb", batch)
    assert logits.shape == (4, 1) and model("rte", batch).shape == (4, 2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    module._loss("stsb", logits, batch["labels"]).backward()
    optimizer.step()
    changed = {n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())}
    assert {"heads.stsb.1.weight", "heads.stsb.1.bias", "backbone.embeddings.word_embeddings.weight"} <= changed
    assert not {n for n in changed if n.startswith("heads.rte.")}
    assert module._loss("rte", model("rte", batch), torch.tensor([0, 1, 1, 0])).ndim == 0

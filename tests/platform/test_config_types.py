"""Types, unknown keys and ranges of every config group are checked at compose time
(ptmlab.config_schema), so a bad value is refused before a job is queued: ConfigError naming the
key for compose_config, 422 from the API (jobs and sweeps), exit 2 from `python -m ptmlab.run`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ptmlab.config import CONF_DIR, compose_config, list_config_groups
from ptmlab.config_schema import GROUPS, STAGES, TARGETS
from ptmlab.errors import ConfigError

GROUP_OPTIONS = list_config_groups()
PARALLEL_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "parallel"


# -- every existing config still composes -------------------------------------------------------


def _family(model: str) -> str:
    return str(OmegaConf.load(CONF_DIR / "model" / f"{model}.yaml").family)


def companions(group: str, option: str) -> list[str]:
    """Overrides an option needs to compose on its own (a model its objective trains, ...)."""
    node = OmegaConf.load(CONF_DIR / group / f"{option}.yaml")
    extra: list[str] = []
    families = node.get("compatible_families")
    if families and group != "model":
        tiny_first = sorted(GROUP_OPTIONS["model"], key=lambda m: ("tiny" not in m, m))
        extra.append("model=" + next(m for m in tiny_first if _family(m) in families and m != "hf"))
    if "name" in (node.get("requires_data") or {}):
        extra += [f"data={node.requires_data.name}", f"data.corpus.path={PARALLEL_FIXTURE}"]
    if group == "model":
        for objective in sorted(GROUP_OPTIONS["objective"]):
            allowed = OmegaConf.load(CONF_DIR / "objective" / f"{objective}.yaml").compatible_families
            if node.family in allowed and "requires_data" not in OmegaConf.load(
                CONF_DIR / "objective" / f"{objective}.yaml"
            ):
                extra.append(f"objective={objective}")
                break
    if (group, option) == ("stage", "finetune"):
        extra.append("task=glue/rte")  # a fine-tune without a task is refused at compose time
    if group == "recipe":  # a recipe sets a fine-tune's training
        extra += ["stage=finetune", "task=glue/rte"]
    return extra


CASES = [(g, o) for g, options in sorted(GROUP_OPTIONS.items()) for o in options]


@pytest.mark.parametrize("group, option", CASES, ids=[f"{g}={o}" for g, o in CASES])
def test_every_option_composes_with_its_types_checked(group, option):
    cfg = compose_config([f"{group}={option}", *companions(group, option)])
    if group not in ("experiment",):
        assert cfg.get(group) is not None


def test_pipeline_jobs_compose_with_their_types_checked():
    for path in sorted((CONF_DIR / "pipeline").glob("*.yaml")):
        spec = OmegaConf.to_container(OmegaConf.load(path))
        common = (spec.get("defaults") or {}).get("overrides", [])
        for job in spec["jobs"]:
            if "{" in job["name"]:
                continue  # templated jobs: tests/platform/test_queue_pipelines.py expands them
            compose_config([f"stage={job['stage']}", *common, *job.get("overrides", [])])


def test_every_target_and_stage_in_conf_has_a_schema():
    """A new `_target_` in conf/ needs its declaration in ptmlab/methods/ and a new stage its node in
    ptmlab/config_schema/ (otherwise it is only checked permissively)."""
    targets, entries = set(), set()
    for path in CONF_DIR.rglob("*.yaml"):
        text = path.read_text()
        targets |= set(re.findall(r"_target_:\s*([\w.]+)", text))
        if path.parent.name == "stage":
            entries.add(str(OmegaConf.load(path).entry))
    assert targets and not targets - set(TARGETS), sorted(targets - set(TARGETS))
    assert entries and not entries - set(STAGES), sorted(entries - set(STAGES))
    assert set(GROUP_OPTIONS) - {"experiment"} <= set(GROUPS)


def test_missing_values_are_left_to_hydra():
    cfg = compose_config(["model=hf"])  # model.name_or_path is ??? until given
    assert OmegaConf.is_missing(cfg.model, "name_or_path")
    compose_config(["data=text_files", "stage=sleep"])  # data.corpus.path ???


# -- bad values are refused naming the key -------------------------------------------------------

FINETUNE = ["stage=finetune", "task=glue/rte"]

BAD = [
    # model: wrong type, unknown key, negative size, dropout out of range, heads not dividing hidden
    (["model.backbone.hidden_size=abc"], "model.backbone.hidden_size='abc': expected an integer"),
    (["model.backbone.num_layers=1.5"], "model.backbone.num_layers=1.5: expected an integer"),
    (["model.backbone.pre_layer_norm=maybe"], "model.backbone.pre_layer_norm='maybe': expected true or false"),
    (["+model.backbone.foo=1"], "model.backbone.foo: unknown key (known: _target_, activation,"),
    (["model.backbone.num_layers=-1"], "model.backbone.num_layers=-1: expected a positive integer"),
    (["model.backbone.dropout=1.0"], r"model.backbone.dropout=1.0: expected a number in [0, 1)"),
    (["model.backbone.attention_dropout=-0.1"], r"model.backbone.attention_dropout=-0.1: expected a number in [0, 1)"),
    (["model.backbone.num_heads=5"], "model.backbone.num_heads=5 does not divide model.backbone.hidden_size=128"),
    (["model.backbone.activation=swishy"], "model.backbone.activation='swishy': expected one of 'gelu'"),
    (["model=albert_tiny", "model.backbone.sharing=layers"], "model.backbone.sharing='layers'"),
    (
        ["model=elmo_tiny", "objective=bilm", "model.backbone.projection_size=128"],
        "model.backbone.projection_size=128 must be smaller than model.backbone.hidden_size=128",
    ),
    (
        ["model=electra_tiny", "objective=rtd", "model.backbone.generator_num_heads=3"],
        "model.backbone.generator_num_heads=3 does not divide model.backbone.generator_hidden_size=32",
    ),
    (["+model.foo=1"], "model.foo: unknown key"),
    # objective
    (["objective.module.mask_prob=1.5"], r"objective.module.mask_prob=1.5: expected a number in (0, 1]"),
    (["objective.module.mask_prob=0"], r"objective.module.mask_prob=0: expected a number in (0, 1]"),
    (
        ["objective.module.mask_token_prob=0.95"],
        "objective.module.mask_token_prob=0.95 + objective.module.random_token_prob=0.1 exceeds 1",
    ),
    (["+objective.module.foo=1"], "objective.module.foo: unknown key"),
    (
        ["objective=mlm_nsp", "objective.objectives.nsp.weight=-1"],
        "objective.objectives.nsp.weight=-1: expected a number >= 0",
    ),
    (
        ["objective=contrastive", "objective.module.temperature=0"],
        "objective.module.temperature=0: expected a number > 0",
    ),
    (
        [
            "model=bart_tiny",
            "objective=dae",
            "objective.module.text_infilling=0",
            "objective.module.sentence_permutation=false",
        ],
        "objective.module: every noising function is off",
    ),
    # trainer, optimizer, scheduler
    (["trainer.max_steps=abc"], "trainer.max_steps='abc': expected an integer"),
    (["trainer.accumulate_grad_batches=0"], "trainer.accumulate_grad_batches=0: expected a positive integer"),
    (["trainer.enable_progress_bar=maybe"], "trainer.enable_progress_bar='maybe': expected true or false"),
    (["+trainer.callbacks=x"], "trainer.callbacks: unknown key"),
    (["trainer.max_steps=-1"], "trainer.max_steps=-1: stage=pretrain needs a positive number of steps"),
    (["optimizer.lr=0"], "optimizer.lr=0: expected a number > 0"),
    (["optimizer.lr=-1e-3"], "optimizer.lr=-0.001: expected a number > 0"),
    (["optimizer.lr=abc"], "optimizer.lr='abc': expected a number"),
    (["optimizer.betas=[0.9,1.5]"], "optimizer.betas=[0.9, 1.5]: expected two numbers in [0, 1)"),
    (["+optimizer.momentum=0.9"], "optimizer.momentum: unknown key"),
    (["scheduler.warmup_ratio=1.5"], r"scheduler.warmup_ratio=1.5: expected a number in [0, 1)"),
    # stage
    ([*FINETUNE, "stage.batch_size=-4"], "stage.batch_size=-4: expected a positive integer"),
    ([*FINETUNE, "stage.lr=0"], "stage.lr=0: expected a number > 0"),
    ([*FINETUNE, "stage.head_dropout=1.0"], r"stage.head_dropout=1.0: expected a number in [0, 1)"),
    ([*FINETUNE, "stage.pooling=max"], "stage.pooling='max': expected one of 'pool_index', 'mean'"),
    ([*FINETUNE, "+stage.foo=1"], "stage.foo: unknown key"),
    (["stage=pretrain", "stage.export_hf=maybe"], "stage.export_hf='maybe': expected true or false"),
    (["stage=sleep", "stage.seconds=-1"], "stage.seconds=-1: expected a number >= 0"),
    (["stage=multitask", "stage.max_steps=0"], "stage.max_steps=0: expected a positive integer"),
    (["stage=multitask", "+stage.task_overrides.rte.foo=1"], "stage.tasks[rte].foo: unknown key"),
    # task
    ([*FINETUNE, "+task.foo=1"], "task.foo: unknown key"),
    ([*FINETUNE, "task.data.source=ftp"], "task.data.source='ftp': expected one of 'local', 'hf'"),
    ([*FINETUNE, "task.data.task=squad"], "task.data.task='squad': expected one of 'cola'"),
    ([*FINETUNE, "+task.data.foo=1"], "task.data.foo: unknown key"),
    (["stage=finetune", "task=tabular", "task.data.text_fields=[a,b,c]"], "task.data.text_fields="),
    # data
    (["data.batch_size=0"], "data.batch_size=0: expected a positive integer"),
    (["data.block_size=abc"], "data.block_size='abc': expected an integer"),
    (["data.val_fraction=1.0"], r"data.val_fraction=1.0: expected a number in (0, 1)"),
    (["data.construction=sentences"], "data.construction='sentences': expected one of"),
    (["+data.corpus.foo=1"], "data.corpus.foo: unknown key (known: _target_, max_documents)"),
    (["data.block_size=1024"], "data.block_size=1024 exceeds model.backbone.max_position_embeddings=512"),
    # tokenizer
    (["tokenizer.vocab_size=abc"], "tokenizer.vocab_size='abc': expected an integer"),
    (["tokenizer.vocab_size=-5"], "tokenizer.vocab_size=-5: expected a positive integer"),
    (["tokenizer.kind=sentencepiece"], "tokenizer.kind='sentencepiece': expected one of"),
    (["tokenizer.lowercase=maybe"], "tokenizer.lowercase='maybe': expected true or false"),
    (["tokenizer.kind=pretrained"], "tokenizer.kind=pretrained needs tokenizer.path"),
    # adaptation
    (
        [*FINETUNE, "adaptation=adapters", "adaptation.bottleneck=-4"],
        "adaptation.bottleneck=-4: expected a positive integer",
    ),
    (
        [*FINETUNE, "adaptation=adapters", "adaptation.bottleneck=abc"],
        "adaptation.bottleneck='abc': expected an integer",
    ),
    ([*FINETUNE, "adaptation=l2sp", "adaptation.alpha=-1.0"], "adaptation.alpha=-1.0: expected a number >= 0"),
    (
        [*FINETUNE, "adaptation=discriminative_lr", "adaptation.decay=0"],
        r"adaptation.decay=0: expected a number in (0, 1]",
    ),
    (
        [*FINETUNE, "adaptation=freeze_layers", "adaptation.num_trainable=1"],
        "adaptation needs exactly one of adaptation.num_frozen, adaptation.num_trainable",
    ),
    ([*FINETUNE, "adaptation=full", "+adaptation.foo=1"], "adaptation.foo: unknown key"),
    ([*FINETUNE, "adaptation=lora", "adaptation.rank=0"], "adaptation.rank=0: expected a positive integer"),
    (
        [*FINETUNE, "adaptation=lora", "adaptation.target_modules=[]"],
        "adaptation.target_modules=[]: expected a non-empty list",
    ),
    ([*FINETUNE, "adaptation=lora", "adaptation.dropout=1.0"], "adaptation.dropout=1.0: expected a number in [0, 1)"),
    (
        [*FINETUNE, "adaptation=prompt_tuning", "adaptation.num_tokens=0"],
        "adaptation.num_tokens=0: expected a positive integer",
    ),
    (
        [*FINETUNE, "adaptation=prompt_tuning", "adaptation.init=words"],
        "adaptation.init=words needs adaptation.init_words",
    ),
    (
        [*FINETUNE, "adaptation=prefix_tuning", "adaptation.num_tokens=500", "model=bert_tiny"],
        "adaptation.num_tokens=500 + task.max_length=128 = 628 exceeds model.backbone.max_position_embeddings=",
    ),
    (
        [
            *FINETUNE,
            "adaptation=prompt_finetune",
            "++task.prompt.template='{sentence} was good .'",
            "++task.prompt.verbalizer.0=bad",
        ],
        "task.prompt.template='{sentence} was good .': expected a string with one [MASK] slot",
    ),
    # root keys
    (["seed=-1"], "seed=-1: expected a seed in [0, 4294967295]"),
    (["resume=maybe"], "resume='maybe': expected true or false"),
    (["checkpoint_every_n_steps=-10"], "checkpoint_every_n_steps=-10: expected an integer >= 0"),
    (["+foo=1"], "foo: unknown key (known: adaptation, attack, backbone,"),
    (["+paths.foo=x"], "paths.foo: unknown key"),
    (["tracking.experiment=${nope}"], "tracking.experiment=${nope}: cannot be resolved"),
]


@pytest.mark.parametrize("overrides, message", BAD, ids=[" ".join(o) for o, _ in BAD])
def test_a_bad_value_is_refused_at_compose_time_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as info:
        compose_config(overrides)
    text = str(info.value)
    assert message in text and "\n" not in text, text


def test_several_bad_values_are_named_together():
    with pytest.raises(ConfigError) as info:
        compose_config(["model.backbone.hidden_size=abc", "optimizer.lr=0", "data.batch_size=0", "seed=-1"])
    text = str(info.value)
    assert text.startswith("seed=-1") or "model.backbone.hidden_size='abc'" in text
    assert "(and 1 more)" in text


def test_a_value_others_interpolate_is_named():
    with pytest.raises(ConfigError, match=r"tokenizer.vocab_size='abc': expected an integer"):
        compose_config(["tokenizer.vocab_size=abc"])


def test_good_values_of_every_kind_are_accepted():
    compose_config(
        [
            "model.backbone.dropout=0",
            "model.backbone.num_heads=4",
            "optimizer.lr=1",
            "trainer.devices=[0]",
            "trainer.val_check_interval=0.5",
            "trainer.precision=16",
            "+trainer.overfit_batches=1",
            "seed=0",
            "+tags.demo=true",
            "+run_dir=/tmp/x",
        ]
    )
    compose_config(["model=bart_tiny", "objective=dae", "objective.module.text_infilling=0"])  # permutation still on
    compose_config([*FINETUNE, "adaptation=freeze_layers", "adaptation.num_frozen=null", "adaptation.num_trainable=1"])
    compose_config(["stage=sleep", "+stage.input=job:prepare", "+stage.message=hello"])  # the test stage takes extras


# -- the API and the entry point ------------------------------------------------------------------

API = "/api/v1"


@pytest.fixture()
def client(tmp_path):
    from fastapi.testclient import TestClient

    from ptmlab.api.app import create_app
    from ptmlab.db import dispose_engines
    from ptmlab.settings import Settings

    settings = Settings(
        home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'platform.db'}", data_dir=tmp_path / "data"
    )
    with TestClient(create_app(settings)) as c:
        yield c
    dispose_engines()


def test_api_refuses_a_wrong_type_with_422_naming_the_key(client):
    r = client.post(f"{API}/jobs", json={"overrides": ["model.backbone.hidden_size=abc"]})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert (
        error["code"] == "config_error" and "model.backbone.hidden_size='abc': expected an integer" in error["message"]
    )
    r = client.post(f"{API}/jobs", json={"overrides": ["+model.backbone.foo=1"]})
    assert r.status_code == 422 and "model.backbone.foo: unknown key" in r.json()["error"]["message"]
    assert client.get(f"{API}/jobs").json()["total"] == 0


def test_api_sweep_refuses_a_bad_value_in_any_combination(client):
    r = client.post(f"{API}/sweeps", json={"overrides": ["model.backbone.num_layers=2,-1"], "dry_run": True})
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    assert "model.backbone.num_layers=-1" in message and "expected a positive integer" in message
    ok = client.post(f"{API}/sweeps", json={"overrides": ["model.backbone.num_layers=1,2"], "dry_run": True})
    assert ok.status_code in (200, 201) and ok.json()["count"] == 2


def test_local_run_exits_2_with_one_line_naming_the_key(tmp_path):
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", "model.backbone.hidden_size=abc"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == ["error[config_error]: model.backbone.hidden_size='abc': expected an integer"]
    assert not (tmp_path / "home").exists()


def test_the_schemas_are_torch_free():
    code = (
        "import sys; from ptmlab.config import compose_config; compose_config(['stage=finetune', 'task=glue/rte']);"
        "bad = [m for m in ('torch', 'lightning', 'lightning_modules', 'transformers') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_hydra_launcher_sweep_refuses_a_bad_value_before_queueing(tmp_path):
    from ptmlab import queue
    from ptmlab.db import dispose_engines, get_sessionmaker

    db_url = f"sqlite:///{tmp_path / 'platform.db'}"
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home"), "PTMLAB_DATABASE_URL": db_url}
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", "-m", "hydra/launcher=ptmlab", "model.backbone.num_layers=2,-1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=180,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error[config_error]: combination [model.backbone.num_layers=-1]: "
        "model.backbone.num_layers=-1: expected a positive integer"
    ), proc.stderr
    with get_sessionmaker(db_url)() as session:
        assert queue.list_jobs(session, limit=10)[1] == 0
    dispose_engines()

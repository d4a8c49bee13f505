"""The contract every objective keeps, checked on every conf/objective/*.yaml (combined ones
included) with a tiny model of the first family it trains: one suite, every implementation, as
Hydra's launcher test suites do. A new objective config is covered by adding its YAML.

    - the loss of a real batch is finite and its gradient reaches the backbone;
    - the same seed gives the same corruption (and the same step); another corruption seed, another;
    - a batch of padding only gives a finite loss, metrics and gradients, never NaN (the mean of
      nothing): exactly 0 where nothing is left to predict (T5 still predicts the closing sentinel
      and </s> of an empty row, sentence-level losses still have their pair labels);
    - what the pre-training stage logs from it has `stage/name` keys (`train/mlm/mlm_acc`).

Statistics of each objective's corruption are tested in its own file (test_masking.py, ...)."""

from __future__ import annotations

import math
import random
import re

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lightning_modules.objectives.parts import build_objectives
from lightning_modules.objectives.seeding import SeededCorruption
from lightning_modules.stages.pretrain import build_backbone
from lightning_modules.stages.pretrain_module import PretrainModule
from ptmlab.config import CONF_DIR, compose_config, list_config_groups

GROUPS = list_config_groups()
OBJECTIVES = GROUPS["objective"]
PARALLEL_FIXTURE = CONF_DIR.parent / "tests" / "fixtures" / "parallel"
WORDS = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox jumps".split()
METRIC_KEY = re.compile(r"^(train|val)(/[a-z0-9_]+)+$")
SEQ_LEN = 48  # long enough for T5 to draw two noise spans (one span has no randomness to seed)


def tiny_model_for(objective: str) -> str:
    """The first tiny model config (by name) of a family the objective trains."""
    families = list(OmegaConf.load(CONF_DIR / "objective" / f"{objective}.yaml").compatible_families)
    for model in sorted(m for m in GROUPS["model"] if "tiny" in m):
        if OmegaConf.load(CONF_DIR / "model" / f"{model}.yaml").family in families:
            return model
    raise AssertionError(f"objective={objective}: no tiny model of families {families}")


def compose(objective: str):
    overrides = [f"objective={objective}", f"model={tiny_model_for(objective)}"]
    required_data = OmegaConf.load(CONF_DIR / "objective" / f"{objective}.yaml").get("requires_data") or {}
    if "name" in required_data:  # tlm reads parallel text
        overrides += [f"data={required_data['name']}", f"data.corpus.path={PARALLEL_FIXTURE}"]
    return compose_config(overrides)


def sentences(n: int, seed: int) -> list[str]:
    # Sentences end in full stops, so sentence permutation (dae) has sentences to permute.
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + "." for _ in range(n)]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from lightning_modules.data.corpus import TextFilesCorpus
    from lightning_modules.data.tokenizer import build_tokenizer

    folder = tmp_path_factory.mktemp("corpus")
    (folder / "doc.txt").write_text("\n".join(sentences(400, seed=0)) + "\n")
    cfg = OmegaConf.create({"kind": "wordpiece", "vocab_size": 90, "min_frequency": 1, "lowercase": True})
    return build_tokenizer(cfg, TextFilesCorpus(str(folder)), tmp_path_factory.mktemp("tok"))


def real_batch(tokenizer, batch_size: int = 4) -> dict[str, torch.Tensor]:
    """Segment pairs as data.construction=segment_pairs makes them ("[CLS] a [SEP] b [SEP]",
    token types, pair labels), the shortest pair padded."""
    firsts = [" ".join(sentences(3 + i, seed=i)) for i in range(batch_size)]
    seconds = [" ".join(sentences(3, seed=100 + i)) for i in range(batch_size)]
    firsts[-1], seconds[-1] = "the cat sat.", "a dog ran."
    enc = tokenizer(
        firsts,
        seconds,
        truncation=True,
        max_length=SEQ_LEN,
        padding="max_length",
        return_token_type_ids=True,
        return_tensors="pt",
    )
    return {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "token_type_ids": enc["token_type_ids"],
        "pair_label": torch.arange(batch_size) % 2,
    }


def padding_batch(tokenizer, batch_size: int = 4) -> dict[str, torch.Tensor]:
    ids = torch.full((batch_size, SEQ_LEN), tokenizer.pad_token_id)
    return {
        "input_ids": ids,
        "attention_mask": torch.zeros_like(ids),
        "token_type_ids": torch.zeros_like(ids),
        "pair_label": torch.arange(batch_size) % 2,
    }


def build(objective: str, tokenizer, seed: int = 0) -> PretrainModule:
    """The backbone and the weighted objective(s) as stage=pretrain builds them, under `seed`."""
    cfg = compose(objective)
    torch.manual_seed(seed)
    backbone = build_backbone(cfg.model, len(tokenizer))
    objectives, weights = build_objectives(cfg.objective, backbone, tokenizer)
    return PretrainModule(
        backbone, objectives, weights, OmegaConf.create({"lr": 1e-3}), None, total_steps=1, seq_len=SEQ_LEN
    )


def capture_logs(module: PretrainModule) -> dict[str, float]:
    logged: dict[str, float] = {}
    module.log = lambda key, value, **_: logged.__setitem__(key, float(torch.as_tensor(value).detach()))
    return logged


def step_loss(module: PretrainModule, batch) -> torch.Tensor:
    capture_logs(module)
    return module.training_step(batch, 0)


@pytest.fixture(autouse=True)
def seed_from_torch(monkeypatch):
    # Objectives without an explicit seed draw from the run's seed: here torch's, set by build().
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_loss_is_finite_and_its_gradient_reaches_the_backbone(objective, tokenizer):
    module = build(objective, tokenizer)
    loss = step_loss(module, real_batch(tokenizer))
    assert loss.ndim == 0 and torch.isfinite(loss), float(loss)
    loss.backward()
    grads = [p.grad for p in module.backbone.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads), f"objective={objective}: no gradient reaches the backbone"


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_same_seed_gives_the_same_corruption(objective, tokenizer):
    batch = real_batch(tokenizer)
    runs = []
    for _ in range(2):
        module = build(objective, tokenizer, seed=3)
        runs.append([float(step_loss(module, batch).detach()) for _ in range(2)])  # the stream goes on alike
    assert runs[0] == runs[1]

    module = build(objective, tokenizer).eval()  # no dropout: only the corruption draws
    corruptions = [m for m in module.modules() if isinstance(m, SeededCorruption)]

    def eval_loss_with(seed: int) -> float:
        for corruption in corruptions:
            corruption.seed = seed
        module.eval()  # a fresh evaluation generator from the new seed
        with torch.no_grad():
            return float(module._compute(batch)[0])

    assert eval_loss_with(1) == eval_loss_with(1)
    if corruptions:
        assert eval_loss_with(1) != eval_loss_with(2), f"objective={objective}: the seed does not reach the corruption"


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_a_batch_of_padding_gives_a_finite_loss(objective, tokenizer):
    module = build(objective, tokenizer)
    batch = padding_batch(tokenizer)
    total, parts = module._compute(batch)
    assert torch.isfinite(total), f"objective={objective}: loss {float(total)} on a batch with nothing to predict"
    for name, out in parts.items():
        assert all(math.isfinite(float(v)) for v in out.metrics.values()), (name, out.metrics)
        if out.num_predicted_tokens == 0:  # a token loss over no token: 0, not the mean of nothing
            assert float(out.loss.detach()) == 0.0, (name, float(out.loss.detach()))
    total.backward()
    assert all(torch.isfinite(p.grad).all() for p in module.parameters() if p.grad is not None)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_logged_metric_keys_are_stage_slash_name(objective, tokenizer):
    module = build(objective, tokenizer)
    batch = real_batch(tokenizer)
    logged = capture_logs(module)
    module.training_step(batch, 0)
    module.eval()
    with torch.no_grad():
        module.on_validation_epoch_start()
        module.validation_step(batch, 0)
    module.on_validation_epoch_end()
    assert {"train/loss", "val/loss"} <= set(logged)
    bad = sorted(key for key in logged if not METRIC_KEY.match(key))
    assert not bad, f"objective={objective} logs keys not of the stage/name form: {bad}"
    assert all(math.isfinite(v) for v in logged.values()), logged

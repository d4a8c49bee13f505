"""Adversarial training in embedding space (`defence=freelb | pgd`,
lightning_modules/adaptation/adversarial.py): the perturbation stays in its ball and off the
padding, K ascent steps raise the loss on a fixed batch, FreeLB's parameter gradients are the mean
of the K passes' (PGD's the last pass's), checked by hand; a fine-tune through the stage trains
with it (full and LoRA, with clipping, accumulation and fused AdamW) and records it in its summary
and task model; bad settings are one line before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from test_adaptation import batch, make_model
from test_attack_stage import TINY, corpus, home

from lightning_modules.adaptation.adversarial import PGD, FreeLB, ascent_step, initial_perturbation, project
from ptmlab.errors import ConfigError


def padded() -> dict[str, torch.Tensor]:
    b = batch()
    b["attention_mask"][1, 6:] = 0
    b["attention_mask"][4, 3:] = 0
    return b


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_perturbation_starts_within_its_magnitude_off_the_padding_and_projects_into_the_ball(norm):
    mask = padded()["attention_mask"]
    g = torch.Generator().manual_seed(0)
    delta = initial_perturbation(mask, 8, init_mag=0.5, norm=norm, generator=g)
    assert delta.shape == (6, 10, 8)
    assert torch.all(delta[mask == 0] == 0) and torch.all(delta[mask == 1] != 0)
    if norm == "l2":  # U(-1,1)·mag/√(length·E): within mag, about mag/√3
        norms = delta.flatten(1).norm(dim=1)
        assert torch.all(norms <= 0.5) and torch.allclose(norms, torch.full((6,), 0.5 / 3**0.5), rtol=0.15)
    else:
        assert delta.abs().max() <= 0.5
    big = torch.randn(6, 10, 8, generator=g) * 3
    big[0] *= 1e-3  # already inside: left as it is
    projected = project(big, 1.0, norm)
    if norm == "l2":
        norms = projected.flatten(1).norm(dim=1)
        assert torch.all(norms <= 1.0 + 1e-6) and torch.allclose(norms[1:], torch.ones(5))
        assert torch.allclose(projected[1] / big[1], torch.full_like(big[1], float(norms[1] / big[1].norm())))
    else:
        assert projected.abs().max() <= 1.0 and torch.equal(projected, big.clamp(-1, 1))
    assert torch.equal(projected[0], big[0]) and torch.equal(project(big, 0.0, norm), big)  # 0: unbounded


def test_an_ascent_step_moves_along_the_normalised_gradient_and_leaves_padding_alone():
    mask = padded()["attention_mask"]
    grad = torch.randn(6, 10, 8)
    step = ascent_step(torch.zeros(6, 10, 8), grad, mask, step_size=0.1, max_norm=0.0, norm="l2")
    masked = grad * mask.unsqueeze(-1)
    expected = 0.1 * masked / masked.flatten(1).norm(dim=1).view(-1, 1, 1)
    assert torch.allclose(step, expected) and torch.all(step[mask == 0] == 0)
    assert torch.allclose(step.flatten(1).norm(dim=1), torch.full((6,), 0.1))


def recorded_deltas(model, adversarial) -> list[torch.Tensor]:
    """The perturbation each forward pass of the model saw."""
    seen: list[torch.Tensor] = []

    def record(module, args):
        if adversarial.perturbation.delta is not None:
            seen.append(adversarial.perturbation.delta.detach().clone())

    model.register_forward_pre_hook(record)
    return seen


def grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_freelb_raises_the_loss_over_k_ascent_steps_and_accumulates_every_pass_gradient():
    model = make_model().eval()  # no dropout: each pass differs by δ alone
    b = padded()
    adversarial = FreeLB(adv_k=3, adv_lr=0.05, adv_init_mag=0.0, adv_max_norm=0.0)
    adversarial.attach(model)
    seen = recorded_deltas(model, adversarial)
    final, logged = adversarial.step_loss(model, b, F.cross_entropy, lambda loss: loss.backward())
    final.backward()
    got = grads(model)
    losses = adversarial.last_losses
    assert len(losses) == len(seen) == 3
    assert torch.all(seen[0] == 0)  # adv_init_mag=0: the first pass is the clean loss
    assert losses[0] < losses[1] < losses[2], losses  # each ascent step raises the loss
    assert float(logged) == pytest.approx(sum(losses) / 3, rel=1e-5)
    seen = list(seen)  # the passes of the step (the forward passes below are recorded too)
    # δ₁ by hand: the normalised gradient of the clean loss with respect to the embeddings' output
    adversarial.perturbation.delta = d0 = torch.zeros_like(seen[0]).requires_grad_(True)
    (g0,) = torch.autograd.grad(F.cross_entropy(model(b), b["labels"]), d0)
    assert torch.allclose(seen[1], ascent_step(d0.detach(), g0, b["attention_mask"], 0.05, 0.0, "l2"), atol=1e-6)
    # the parameters' gradients: the mean over the K passes, each at its own δ
    model.zero_grad()
    for delta in seen:
        adversarial.perturbation.delta = delta
        (F.cross_entropy(model(b), b["labels"]) / 3).backward()
    adversarial.perturbation.delta = None
    expected = grads(model)
    assert got.keys() == expected.keys()
    for name in expected:
        assert torch.allclose(got[name], expected[name], atol=1e-6), name
    clean = F.cross_entropy(model(b), b["labels"]).detach()
    assert float(clean) == pytest.approx(losses[0], rel=1e-5)  # the hook is inert without a δ


def test_pgd_takes_the_parameter_gradient_of_the_last_pass_only():
    model = make_model().eval()
    b = padded()
    adversarial = PGD(adv_k=2, adv_lr=0.05, adv_init_mag=0.03, adv_max_norm=0.08)
    adversarial.attach(model)
    seen = recorded_deltas(model, adversarial)
    backward_calls = []
    final, _ = adversarial.step_loss(model, b, F.cross_entropy, backward_calls.append)
    final.backward()
    got = grads(model)
    assert not backward_calls and len(seen) == 3  # K ascent passes (δ only) + the training pass
    assert all(torch.all(d.flatten(1).norm(dim=1) <= 0.08 + 1e-6) for d in seen[1:])
    assert adversarial.last_losses[0] < adversarial.last_losses[-1]
    model.zero_grad()
    adversarial.perturbation.delta = seen[-1].clone()
    F.cross_entropy(model(b), b["labels"]).backward()
    for name, g in grads(model).items():
        assert torch.allclose(got[name], g, atol=1e-6), name


def test_same_dropout_mask_gives_every_pass_one_network():
    torch.manual_seed(0)
    model = make_model().train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.5
    b = padded()
    adversarial = FreeLB(adv_k=2, adv_lr=0.0, adv_init_mag=0.0)  # δ stays 0: passes differ by dropout only
    adversarial.step_loss(model, b, F.cross_entropy, lambda loss: loss.backward())
    assert adversarial.last_losses[0] == pytest.approx(adversarial.last_losses[1], rel=1e-6)
    adversarial.detach()
    adversarial = FreeLB(adv_k=2, adv_lr=0.0, adv_init_mag=0.0, same_dropout_mask=False)
    adversarial.step_loss(model, b, F.cross_entropy, lambda loss: loss.backward())
    assert adversarial.last_losses[0] != pytest.approx(adversarial.last_losses[1], rel=1e-6)


# -- through the stage -----------------------------------------------------------------------------


def finetune(run_dir: Path, corpus_dir: Path, *extra: str) -> dict:
    from lightning_modules.stages.finetune import run_finetune
    from ptmlab.config import compose_config

    return run_finetune(
        compose_config(
            [
                "stage=finetune",
                *TINY,
                "data=text_files",
                f"data.corpus.path={corpus_dir}",
                "task=glue/sst2",
                "task.max_train_samples=32",
                "task.max_eval_samples=16",
                "task.max_length=32",
                "stage.epochs=1",
                "stage.batch_size=8",
                f"+run_dir={run_dir}",
                *extra,
            ]
        )
    )


@pytest.mark.parametrize(
    "extra",
    [
        [
            "defence=freelb",
            "defence.adv_max_norm=0.5",
            "trainer.accumulate_grad_batches=2",
            "trainer.precision=bf16-mixed",
        ],
        ["defence=pgd", "adaptation=lora"],
    ],
    ids=["freelb-full-accumulating-bf16", "pgd-lora"],
)
def test_a_fine_tune_trains_adversarially_and_records_it(extra, home, data_dir, corpus, tmp_path):
    summary = finetune(tmp_path / "run", corpus, *extra)
    name = extra[0].split("=")[1]
    assert summary["defence"]["name"] == name and summary["defence"]["adv_k"] == 2
    assert summary["steps"] > 0 and summary["main_score"] is not None
    assert summary["trainable_params"] < summary["total_params"] if "adaptation=lora" in extra else True
    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert written["defence"] == summary["defence"]
    manifest = json.loads((Path(summary["task_model_dir"]) / "task_model.json").read_text())
    assert manifest["defence"]["name"] == name
    if name == "freelb":  # what stage=attack reports of its source, for comparing defences
        from test_attack_stage import attack

        attacked = attack(
            tmp_path / "attack", "attack=deepwordbug", f"source={tmp_path / 'run'}", "attack.num_examples=4"
        )
        assert attacked["source_defence"] == summary["defence"] and attacked["source_adaptation"] == "full"


def test_plain_fine_tune_records_no_defence(home, data_dir, corpus, tmp_path):
    summary = finetune(tmp_path / "run", corpus, "stage.max_steps=1")
    assert summary["defence"] is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["stage=finetune", "task=glue/sst2", "defence=freelb", "adaptation=prompt_zero_shot"],
            "defence=freelb with adaptation=prompt_zero_shot: the adaptation does not train",
        ),
        (["stage=multitask", "defence=pgd"], "defence=pgd with stage=multitask"),
        (
            ["stage=finetune", "task=glue/sst2", "defence=freelb", "defence.adv_norm_type=l3"],
            "defence.adv_norm_type='l3': expected one of",
        ),
        (["stage=finetune", "task=glue/sst2", "defence=freelb", "defence.adv_lr=-1.0"], "defence.adv_lr=-1.0"),
    ],
    ids=["zero-shot", "multitask", "norm", "negative-lr"],
)
def test_bad_combinations_are_refused_at_compose_time(overrides, message):
    from ptmlab.config import compose_config

    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
        compose_config(overrides)


def test_a_bad_setting_is_one_line_before_any_run(home, data_dir, corpus, tmp_path, monkeypatch):
    """In process, where ptmlab.run meets it (stage_preflight.py; exit 2 through the entry point is
    the finetune stage's one run)."""
    from stage_preflight import error_line_before_work

    run_dir = tmp_path / "run"
    line = error_line_before_work(
        [
            "stage=finetune",
            *TINY,
            "task=glue/sst2",
            "data=text_files",
            f"data.corpus.path={corpus}",
            "defence=freelb",
            "defence.adv_k=0",
            f"+run_dir={run_dir}",
        ],
        monkeypatch,
    )
    assert line.startswith("error[config_error]") and "defence.adv_k=0" in line, line
    assert not (run_dir / "summary.json").exists()

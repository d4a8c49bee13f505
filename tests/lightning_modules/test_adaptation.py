"""Every adaptation mode trains a few steps and trains exactly the parameters it claims."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from lightning_modules.adaptation.adapters import Adapters, BottleneckAdapter
from lightning_modules.adaptation.base import count_trainable
from lightning_modules.adaptation.chain_thaw import ChainThaw
from lightning_modules.adaptation.discriminative_lr import DiscriminativeLR
from lightning_modules.adaptation.feature import FeatureBased
from lightning_modules.adaptation.freeze_layers import FreezeLayers
from lightning_modules.adaptation.full import FullFineTuning
from lightning_modules.adaptation.gradual_unfreezing import GradualUnfreezing
from lightning_modules.adaptation.l2sp import L2SP
from lightning_modules.heads.task_model import TaskModel
from lightning_modules.models.transformer import TransformerEncoder
from lightning_modules.optim import build_optimizer

H, L, V, LABELS = 32, 3, 50, 3


def n_params(modules) -> int:
    return sum(p.numel() for m in modules for p in m.parameters())


def make_model(scalar_mix: bool = False) -> TaskModel:
    torch.manual_seed(0)
    backbone = TransformerEncoder(
        vocab_size=V, hidden_size=H, num_layers=L, num_heads=4, intermediate_size=64, max_position_embeddings=32
    )
    return TaskModel(backbone, LABELS, scalar_mix=scalar_mix)


def batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, V, (6, 10), generator=g)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": torch.zeros_like(ids),
        "pool_index": torch.zeros(6, dtype=torch.long),
        "labels": torch.randint(0, LABELS, (6,), generator=g),
    }


def train_steps(model, adaptation, steps: int = 3, lr: float = 1e-2):
    optimizer = build_optimizer(
        adaptation.param_groups(model, lr, 0.0), OmegaConf.create({"_target_": "torch.optim.AdamW", "_partial_": True})
    )
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for step in range(steps):
        adaptation.on_train_step(model, step, steps)
        b = batch()
        loss = F.cross_entropy(model(b), b["labels"])
        reg = adaptation.regularization(model)
        loss = loss + (reg if torch.is_tensor(reg) else 0.0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    changed = {n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())}
    return changed


def trainable_names(model) -> set[str]:
    return {n for n, p in model.named_parameters() if p.requires_grad}


def test_full_trains_everything():
    model, mode = make_model(), FullFineTuning()
    mode.prepare(model)
    assert count_trainable(model) == n_params([model])
    changed = train_steps(model, mode)
    assert "backbone.embeddings.word_embeddings.weight" in changed and "head.1.weight" in changed


def test_feature_based_trains_only_scalar_mix_and_head():
    model, mode = make_model(scalar_mix=True), FeatureBased()
    mode.prepare(model)
    assert count_trainable(model) == (L + 1) + 1 + (H * LABELS + LABELS)  # scalars + gamma + head
    changed = train_steps(model, mode)
    assert changed == trainable_names(model)
    assert not any(n.startswith("backbone.") for n in changed)
    model.train()
    assert not model.backbone.training  # frozen features: the backbone stays in eval mode


def test_adapters_train_adapters_layer_norms_and_head_only():
    model, mode = make_model(), Adapters(bottleneck=4)
    total_before = n_params([model])
    mode.prepare(model)
    adapters = [m for m in model.modules() if isinstance(m, BottleneckAdapter)]
    assert len(adapters) == 2 * L  # after attention and after feed-forward, in every layer
    per_adapter = H * 4 + 4 + 4 * H + H
    norms = [m for m in model.backbone.modules() if isinstance(m, torch.nn.LayerNorm)]
    expected = len(adapters) * per_adapter + n_params(norms) + (H * LABELS + LABELS)
    assert count_trainable(model) == expected
    assert n_params([model]) == total_before + len(adapters) * per_adapter
    changed = train_steps(model, mode)
    assert changed == trainable_names(model)


def test_adapters_start_as_the_pretrained_model():
    model = make_model()
    b = batch()
    model.eval()
    reference = model(b)
    Adapters(bottleneck=4).prepare(model)
    model.eval()
    assert torch.allclose(model(b), reference, atol=1e-6)


def test_freeze_layers_freezes_embeddings_and_bottom_layers():
    model, mode = make_model(), FreezeLayers(num_frozen=2)
    mode.prepare(model)
    layers = model.backbone.layer_modules()
    frozen = n_params(model.backbone.embedding_modules()) + n_params(layers[:2])
    assert count_trainable(model) == n_params([model]) - frozen
    changed = train_steps(model, mode)
    assert changed == trainable_names(model)
    assert FreezeLayers(num_trainable=1).prepare(make_model()) is None


def test_gradual_unfreezing_goes_top_down():
    model, mode = make_model(), GradualUnfreezing(unfreeze_every=2)
    mode.prepare(model)
    layers = model.backbone.layer_modules()
    assert count_trainable(model) == n_params([model.head])
    mode.on_train_step(model, 2, 100)
    assert count_trainable(model) == n_params([model.head, layers[-1]])
    mode.on_train_step(model, 4, 100)
    assert count_trainable(model) == n_params([model.head, layers[-1], layers[-2]])
    mode.on_train_step(model, 2 * (L + 1), 100)
    assert count_trainable(model) == n_params([model])
    fresh_model, fresh_mode = make_model(), GradualUnfreezing(unfreeze_every=2)
    fresh_mode.prepare(fresh_model)
    changed = train_steps(fresh_model, fresh_mode, steps=3)  # steps 0,1: head; step 2: + top layer
    assert {n.split(".")[0] for n in changed} == {"head", "backbone"}
    assert not any(".layers.0." in n for n in changed)


def test_chain_thaw_trains_one_part_at_a_time():
    model, mode = make_model(), ChainThaw(steps_per_phase=1)
    mode.prepare(model)
    layers = model.backbone.layer_modules()
    mode.on_train_step(model, 0, 10)
    assert count_trainable(model) == n_params([model.head])
    mode.on_train_step(model, 2, 10)  # head, embeddings, then layer 0
    assert count_trainable(model) == n_params([layers[0]])
    mode.on_train_step(model, 100, 10)
    assert count_trainable(model) == n_params([model])


def test_discriminative_learning_rates_decay_with_depth():
    model, mode = make_model(), DiscriminativeLR(decay=0.5)
    mode.prepare(model)
    groups = mode.param_groups(model, 1.0, 0.0)
    layers = model.backbone.layer_modules()
    rate_of = {id(p): g["lr"] for g in groups for p in g["params"]}
    for index, layer in enumerate(layers):
        assert {rate_of[id(p)] for p in layer.parameters()} == {0.5 ** (L - index)}
    assert {rate_of[id(p)] for p in model.head.parameters()} == {1.0}
    assert {rate_of[id(p)] for m in model.backbone.embedding_modules() for p in m.parameters()} == {0.5 ** (L + 1)}
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    assert train_steps(model, mode)


def test_l2sp_pulls_towards_pretrained_weights():
    model, mode = make_model(), L2SP(alpha=10.0)
    mode.prepare(model)
    assert float(mode.regularization(model)) == 0.0
    train_steps(model, mode, steps=2)
    assert float(mode.regularization(model)) > 0.0
    # The penalty's gradient points from w0 to w, so a step on it alone moves w back towards w0.
    p = model.backbone.embeddings.word_embeddings.weight
    w0 = mode.reference["embeddings.word_embeddings.weight"]
    distance = (p - w0).norm().item()
    model.zero_grad()
    mode.regularization(model).backward()
    with torch.no_grad():
        p -= 1e-3 * p.grad
    assert (p - w0).norm().item() < distance


@pytest.mark.parametrize(
    "name",
    [
        "full",
        "feature",
        "adapters",
        "freeze_layers",
        "gradual_unfreezing",
        "chain_thaw",
        "discriminative_lr",
        "l2sp",
        "lora",
        "bitfit",
        "prompt_tuning",
        "prefix_tuning",
        "prompt_finetune",
        "prompt_zero_shot",
    ],
)
def test_every_adaptation_config_builds(name):
    from lightning_modules.adaptation.from_config import build_adaptation
    from ptmlab.config import compose_config

    cfg = compose_config(["stage=finetune", "task=glue/sst2", f"adaptation={name}"])
    assert build_adaptation(cfg.adaptation).name == name

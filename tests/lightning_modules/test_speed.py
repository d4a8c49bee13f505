"""The speed switches and throughput figures, each on something tiny: torch.compile of the backbone
(and its eager fallback), fused AdamW, bf16 autocast on CPU, gradient accumulation, activation
checkpointing, packed pre-training blocks and length-grouped fine-tuning batches (padding
measured before and after), and the MFU arithmetic. No timing is asserted."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from hydra.utils import get_method, instantiate

from ptmlab.config import compose_config

WORDS = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox jumps".split()


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("speed_corpus")
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14))) for _ in range(600)]
    (folder / "doc.txt").write_text("\n".join(lines) + "\n")
    return folder


def pretrain_cfg(corpus: Path, tmp_path: Path, *extra: str):
    return compose_config(
        [
            "stage=pretrain",
            "model=bert_tiny",
            "objective=mlm",
            "data=text_files",
            f"data.corpus.path={corpus}",
            "data.block_size=32",
            "data.batch_size=8",
            "tokenizer.vocab_size=90",
            "tokenizer.min_frequency=1",
            "trainer.val_check_interval=null",
            "trainer.limit_val_batches=0",
            "trainer.log_every_n_steps=2",
            "trainer.enable_progress_bar=false",
            "checkpoint_every_n_steps=0",
            f"paths.cache_dir={tmp_path / 'cache'}",
            f"+run_dir={tmp_path / 'run'}",
            *extra,
        ]
    )


@pytest.mark.slow
def test_pretrain_with_every_switch_on(corpus_dir, ptmlab_home, tmp_path):
    """compile (Dynamo with the cheap `eager` backend), fused AdamW with clipping, bf16 autocast on CPU,
    accumulation over 2 batches and activation checkpointing in one short run; a configured
    peak gives an MFU."""
    from mlflow.tracking import MlflowClient

    cfg = pretrain_cfg(
        corpus_dir,
        tmp_path,
        "trainer.max_steps=4",
        "trainer.compile=true",
        "trainer.compile_backend=eager",
        "optimizer.fused=true",
        "trainer.precision=bf16-mixed",
        "trainer.gradient_clip_val=1.0",
        "trainer.accumulate_grad_batches=2",
        "trainer.activation_checkpointing=true",
        "trainer.peak_flops=1e12",
    )
    returned = get_method(cfg.stage.entry)(cfg)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 4 and returned["throughput"] == summary["throughput"]
    # 4 optimizer steps × 2 accumulated batches × 8 blocks × 32 tokens
    assert summary["tokens_seen"] == 4 * 2 * 8 * 32
    speed = summary["throughput"]
    assert speed["tokens_per_s"] > 0 and speed["samples_per_s"] > 0 and 0 <= speed["data_wait_fraction"] < 1
    assert speed["peak_flops"] == 1e12 and speed["mfu"] > 0
    assert speed["padding_fraction"] == 0.0  # packed blocks
    run = MlflowClient(tracking_uri=f"sqlite:///{ptmlab_home / 'mlflow.db'}").get_run(summary["mlflow_run_id"])
    assert run.data.tags["ptmlab.compile"] == "compiled"
    assert run.data.tags["ptmlab.activation_checkpointing"] == "2 layers"
    for key in (
        "train/tokens_per_s",
        "train/samples_per_s",
        "train/mfu",
        "train/data_wait_fraction",
        "train/padding_fraction",
        "train/lr",
        "train/tokens_seen",
        "train/flops",
    ):
        assert key in run.data.metrics, key


def test_fused_adamw_is_refused_only_where_it_cannot_work():
    from omegaconf import OmegaConf

    from lightning_modules.runtime.speed import check_trainer_and_optimizer
    from ptmlab.contracts import ConfigError

    fused = OmegaConf.create({"_target_": "torch.optim.AdamW", "fused": True})
    for precision in ("bf16-mixed", "16-mixed", "32-true"):  # clipping a fused optimizer's gradients: fine
        check_trainer_and_optimizer({"precision": precision, "gradient_clip_val": 1.0}, fused)
    check_trainer_and_optimizer({"strategy": "fsdp", "precision": "bf16-mixed", "gradient_clip_val": 1.0}, fused)
    with pytest.raises(ConfigError, match=r"optimizer.fused=true with optimizer.foreach=true"):
        check_trainer_and_optimizer({"precision": "32-true"}, OmegaConf.create({"fused": True, "foreach": True}))
    with pytest.raises(ConfigError, match=r"trainer.strategy=fsdp.*16-mixed.*gradient_clip_val=1.0"):
        check_trainer_and_optimizer({"strategy": "fsdp", "precision": "16-mixed", "gradient_clip_val": 1.0}, fused)


def adamw_cfg(**kwargs):
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {"_target_": "torch.optim.AdamW", "_partial_": True, "lr": 1e-2, "foreach": None, "fused": None, **kwargs}
    )


def test_fused_adamw_is_the_default_where_valid():
    from lightning_modules.optim import build_optimizer

    layer = torch.nn.Linear(4, 4)
    groups = [{"params": list(layer.parameters())}]
    assert build_optimizer(groups, adamw_cfg()).defaults["fused"] is True  # CPU tensors: fused since torch 2.4
    assert not build_optimizer(groups, adamw_cfg(fused=False)).defaults["fused"]
    assert not build_optimizer(groups, adamw_cfg(foreach=True)).defaults["fused"]  # torch takes one or the other
    integer = torch.nn.Parameter(torch.zeros(2, dtype=torch.int64), requires_grad=False)
    assert not build_optimizer([{"params": [integer]}], adamw_cfg()).defaults["fused"]  # no fused kernel for it


class ClippedLinear(__import__("lightning").pytorch.LightningModule):
    """One linear layer whose gradient norm (~1) is far above the clipping threshold."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(8, 8)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).pow(2).mean()

    def configure_optimizers(self):
        from lightning_modules.optim import build_optimizer

        return build_optimizer([{"params": list(self.parameters())}], adamw_cfg(betas=[0.9, 0.999]), self._trainer)


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_fused_adamw_clips_unscaled_gradients_under_mixed_precision(precision, tmp_path):
    """One step of the default (fused) AdamW with clipping, through Lightning on a CPU. Adam's
    first moment after one step is (1 - β1) × the clipped gradient, so its norm shows the
    gradients were clipped at 1e-3 after unscaling (clipped while scaled by 2^10, it would be
    2^10 times smaller). 16-mixed is refused on a CPU by Lightning's flag, so its plugin is given
    directly: the plugin StageRun.build_trainer gives a GPU trainer."""
    import lightning.pytorch as pl

    from lightning_modules.runtime.speed import UnscalingMixedPrecision, unscale_before_clipping

    clip = 1e-3
    precision_args = (
        {"precision": precision}
        if precision == "bf16-mixed"
        else {"plugins": [UnscalingMixedPrecision(precision, "cpu", torch.amp.GradScaler("cpu", init_scale=2.0**10))]}
    )
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=1,
        gradient_clip_val=clip,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        **precision_args,
    )
    unscale_before_clipping(trainer)
    assert isinstance(trainer.precision_plugin, UnscalingMixedPrecision)
    module = ClippedLinear()
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4, 8)), batch_size=4)
    trainer.fit(module, data)
    optimizer = trainer.optimizers[0]
    assert optimizer.defaults["fused"] is True
    first_moment = torch.cat([optimizer.state[p]["exp_avg"].flatten() for p in module.parameters()])
    assert first_moment.norm().item() == pytest.approx(0.1 * clip, rel=1e-2)


def test_compile_falls_back_to_eager_and_says_why():
    from lightning_modules.runtime.speed import compile_backbone

    backbone = torch.nn.Linear(4, 4)
    status = compile_backbone(backbone, backend="no_such_backend")
    assert status.startswith("eager: ") and "no_such_backend" in status
    assert backbone(torch.ones(1, 4)).shape == (1, 4)


@pytest.mark.parametrize("switch", [{"fused": True}, {"foreach": True}])
def test_fused_and_foreach_adamw_step_like_the_default(switch):
    from omegaconf import OmegaConf

    from lightning_modules.optim import build_optimizer

    def trained(**kwargs) -> torch.Tensor:
        torch.manual_seed(0)
        layer = torch.nn.Linear(8, 8)
        cfg = OmegaConf.create({"_target_": "torch.optim.AdamW", "_partial_": True, "lr": 1e-2, **kwargs})
        optimizer = build_optimizer([{"params": list(layer.parameters())}], cfg)
        assert all(optimizer.defaults.get(k) == v for k, v in kwargs.items())
        for _ in range(3):
            optimizer.zero_grad()
            layer(torch.ones(2, 8)).pow(2).sum().backward()
            optimizer.step()
        return layer.weight.detach()

    torch.testing.assert_close(trained(**switch), trained(foreach=False, fused=False), rtol=1e-5, atol=1e-6)


def test_activation_checkpointing_recomputes_and_keeps_gradients():
    from lightning_modules.runtime.speed import checkpoint_layers

    cfg = compose_config(["model=bert_tiny"])

    def grads(checkpointed: bool):
        torch.manual_seed(0)
        backbone = instantiate(cfg.model.backbone, vocab_size=50)
        calls = []
        for layer in backbone.layer_modules():  # a sub-module's calls: recomputation calls it again
            next(layer.children()).register_forward_hook(lambda *a: calls.append(1))
        if checkpointed:
            assert checkpoint_layers(backbone) == len(backbone.layer_modules())
        ids = torch.randint(0, 50, (2, 12))
        backbone(ids, attention_mask=torch.ones_like(ids)).last_hidden_state.sum().backward()
        return {n: p.grad.clone() for n, p in backbone.named_parameters() if p.grad is not None}, len(calls)

    plain, plain_calls = grads(False)
    checkpointed, checkpointed_calls = grads(True)
    assert checkpointed_calls == 2 * plain_calls  # each layer ran again in the backward pass
    assert plain.keys() == checkpointed.keys()
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], rtol=1e-4, atol=1e-6)


def padding_fraction(batches) -> float:
    real = total = 0
    for batch in batches:
        real += int(batch["attention_mask"].sum())
        total += batch["attention_mask"].numel()
    return 1 - real / total


def test_packed_blocks_have_no_padding_line_by_line_has(corpus_dir, tmp_path):
    from lightning_modules.data.pretrain_datamodule import PretrainDataModule

    fractions = {}
    for construction in ("line_by_line", "packed"):
        cfg = pretrain_cfg(corpus_dir, tmp_path, f"data.construction={construction}")
        dm = PretrainDataModule(cfg.data, cfg.tokenizer, cfg.paths.cache_dir, seed=0)
        dm.setup()
        fractions[construction] = padding_fraction(dm.train_dataloader())
    assert fractions["packed"] == 0.0
    assert fractions["line_by_line"] > 0.2, fractions  # lines of 3-14 words padded to the batch's longest


def test_length_grouped_batches_cover_every_example_and_pad_less():
    from lightning_modules.tasks.datamodule import LengthGroupedBatches

    rng = random.Random(1)
    # SST-2-like spread, as many rows as its threshold runs train on: from 6,400 rows at batch 32
    # Hugging Face's sampler sorts mega-batches of 50 batches (fewer rows: four mega-batches)
    lengths = [max(3, int(rng.lognormvariate(3.0, 0.6))) for _ in range(8000)]
    grouped = LengthGroupedBatches(lengths, batch_size=32, seed=0)

    def pad(batches) -> float:
        return 1 - sum(sum(lengths[i] for i in b) for b in batches) / sum(
            len(b) * max(lengths[i] for i in b) for b in batches
        )

    epoch0 = list(grouped)
    assert sorted(i for b in epoch0 for i in b) == list(range(len(lengths))) and len(epoch0) == len(grouped)
    assert lengths.index(max(lengths)) in epoch0[0]  # the Trainer's order: the longest batch first
    grouped.set_epoch(1)
    assert list(grouped) != epoch0  # reshuffled each epoch
    order = list(range(len(lengths)))
    random.Random(0).shuffle(order)
    shuffled = [order[i : i + 32] for i in range(0, len(order), 32)]
    assert pad(epoch0) < 0.25 * pad(shuffled), (pad(epoch0), pad(shuffled))


def test_mfu_needs_a_known_peak():
    from lightning_modules.runtime.throughput import ThroughputMonitor, Totals, peak_flops_per_device, table_peak_flops

    assert table_peak_flops("NVIDIA H100 80GB HBM3", "bf16-mixed") == pytest.approx(989.5e12)
    assert table_peak_flops("NVIDIA H100 PCIe", "bf16-mixed") == pytest.approx(756.5e12)
    assert table_peak_flops("NVIDIA A100-SXM4-80GB", "16-mixed") == pytest.approx(312e12)
    assert table_peak_flops("NVIDIA H200", "32-true") == pytest.approx(66.9e12)
    assert table_peak_flops("NVIDIA GeForce RTX 4090", "bf16-mixed") == pytest.approx(165.2e12)
    assert table_peak_flops("NVIDIA L4", "bf16-true") == pytest.approx(121e12)
    assert peak_flops_per_device("cpu", "32-true", None) is None
    assert peak_flops_per_device("cpu", "32-true", 2e11) == 2e11

    totals = Totals(steps=10, samples=320, tokens=40_960, slots=40_960, flops=40_960 * 6e6, wall_s=2.0, wait_s=0.1)
    known = ThroughputMonitor(lambda _: 6e6, 1e12, "cpu").rates(totals)
    assert known["train/tokens_per_s"] == pytest.approx(20_480)
    assert known["train/mfu"] == pytest.approx(20_480 * 6e6 / 1e12)
    assert known["train/data_wait_fraction"] == pytest.approx(0.05)
    assert "train/mfu" not in ThroughputMonitor(lambda _: 6e6, None, "cpu").rates(totals)
    # two ranks' totals: job-wide tokens/s, per-device MFU
    two = ThroughputMonitor(lambda _: 6e6, 1e12, "cpu").rates(
        Totals(20, 640, 81_920, 81_920, 81_920 * 6e6, 4.0, 0.2), world_size=2
    )
    assert two["train/tokens_per_s"] == pytest.approx(40_960) and two["train/mfu"] == pytest.approx(known["train/mfu"])

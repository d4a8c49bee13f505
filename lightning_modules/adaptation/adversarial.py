"""Adversarial training in embedding space, a defence that composes with any adaptation mode that
trains (`defence=freelb` or `defence=pgd` beside `adaptation=full | lora | bitfit | ...`). The
other defence, training on attack-augmented data (`defence=augment`), is lightning_modules/attacks/augmentation.py.

A perturbation δ (B×T×E) is added to the output of the backbone's word-embedding module
(`backbone.get_input_embeddings()`, a forward hook, so every backbone takes it: ptmlab's own and
Hugging Face checkpoints; right-aligned, so prompt tuning's prepended virtual tokens stay as they
are). Padding positions are never perturbed. Each training step:

    FreeLB (Zhu et al. 2020)  δ₀ uniform (L2: U(-1,1)·adv_init_mag/√(length·E) per example;
                              Linf: U(-adv_init_mag, adv_init_mag)); for k = 1..K: a forward and
                              backward pass of L(x + δ_{k-1})/K, the parameters' gradients
                              accumulating over the K passes, then δ_k = Π(δ_{k-1} + adv_lr·g/‖g‖)
                              with g = ∇δ L and Π the projection onto the ball of radius
                              adv_max_norm (0: unbounded). The optimizer steps once on the sum.
    PGD-K (Madry et al. 2018) the same K ascent steps, but δ's gradient only (the parameters'
                              untouched), then one forward and backward pass at δ_K: the step is
                              taken on the worst perturbation found, K+1 passes in all.

`same_dropout_mask` (FreeLB §3.3): every pass of a step draws the same dropout masks (the random
state is rewound before each pass), so the ascent steps see one network.

The step is written against a `backward(loss)` callable: the finetune module passes one that goes
through Lightning's strategy (loss scaling under mixed precision, division by the gradient
accumulation, its hooks), so gradient clipping, fused AdamW and accumulation work unchanged; the
last pass's loss is returned to Lightning's own closure.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from ptmlab.contracts import ConfigError
from ptmlab.methods.defences import FreeLBParams, PGDParams
from ptmlab.methods.validation import declared_in_code


def initial_perturbation(
    mask: torch.Tensor, embedding_size: int, init_mag: float, norm: str, generator: torch.Generator | None = None
) -> torch.Tensor:
    """B×T×E starting perturbation, zero on padding (`mask` B×T of 0/1)."""
    b, t = mask.shape
    m = mask.to(torch.float32).unsqueeze(-1)  # B×T -> B×T×1
    if init_mag <= 0:
        return torch.zeros(b, t, embedding_size, device=mask.device)
    uniform = torch.rand(b, t, embedding_size, device=mask.device, generator=generator) * 2 - 1  # U(-1, 1)
    if norm == "linf":
        return uniform * init_mag * m
    dims = mask.to(torch.float32).sum(1).clamp(min=1) * embedding_size  # B: the perturbed coordinates
    return uniform * m * (init_mag / dims.sqrt()).view(-1, 1, 1)


def project(delta: torch.Tensor, max_norm: float, norm: str) -> torch.Tensor:
    """Onto the per-example ball of radius `max_norm` (0: unbounded): L2 rescales the examples
    outside it, Linf clamps every coordinate."""
    if max_norm <= 0:
        return delta
    if norm == "linf":
        return delta.clamp(-max_norm, max_norm)
    norms = delta.flatten(1).norm(dim=1)  # B×T×E -> B
    scale = torch.where(norms > max_norm, max_norm / norms.clamp(min=1e-12), torch.ones_like(norms))
    return delta * scale.view(-1, 1, 1)


def ascent_step(
    delta: torch.Tensor, grad: torch.Tensor, mask: torch.Tensor, step_size: float, max_norm: float, norm: str
) -> torch.Tensor:
    """δ + step_size·g/‖g‖ (per example, the norm's own), padding left at zero, projected."""
    grad = torch.nan_to_num(grad.float(), nan=0.0, posinf=0.0, neginf=0.0)  # an overflowing fp16 pass
    grad = grad * mask.to(grad.dtype).unsqueeze(-1)
    p = 2 if norm == "l2" else float("inf")
    denominator = grad.flatten(1).norm(p=p, dim=1).clamp(min=1e-8).view(-1, 1, 1)  # B -> B×1×1
    return project(delta + step_size * grad / denominator, max_norm, norm).detach()


class EmbeddingPerturbation:
    """Adds `delta` (B×T×E, set per pass; None: nothing) to the word embeddings' output."""

    def __init__(self, backbone: nn.Module):
        self.embeddings = backbone.get_input_embeddings()
        self.embedding_size = int(self.embeddings.weight.shape[1])
        self.delta: torch.Tensor | None = None
        self.applied = 0
        self._handle = self.embeddings.register_forward_hook(self._add)

    def remove(self) -> None:
        self._handle.remove()

    def _add(self, module, args, output: torch.Tensor) -> torch.Tensor:
        if self.delta is None:
            return output
        b, t, _ = self.delta.shape
        if output.shape[0] != b or output.shape[1] < t:
            raise ConfigError(
                f"defence: the word embeddings' output {tuple(output.shape)} does not hold the "
                f"batch's {b}×{t} tokens; this backbone cannot be perturbed in embedding space"
            )
        self.applied += 1
        delta = self.delta.to(output.dtype)
        if output.shape[1] == t:
            return output + delta
        return torch.cat([output[:, :-t], output[:, -t:] + delta], dim=1)  # virtual tokens in front: unperturbed


@contextmanager
def rewinding_random_state(enabled: bool, device: torch.device):
    """Yields `rewind()`, which puts the random state back where it was on entry."""
    if not enabled:
        yield lambda: None
        return
    cpu = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    def rewind():
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, device)

    yield rewind


class AdversarialTraining:
    """Base of the embedding-space defences; `accumulates`: FreeLB (every pass's parameter
    gradients count) or PGD (only the last pass's)."""

    name = "adversarial"
    accumulates = True

    declaration: type[FreeLBParams]  # each defence names its own (`declaration = FreeLBParams`)
    params: FreeLBParams

    def __init__(self, params: FreeLBParams | None = None, **values: Any):
        """`params`: the validated declaration, which alone states each setting, its default and its
        bounds; in code (and from `build_defence`'s node), its values as keywords, validated by the
        same declaration."""
        self.params = params if params is not None else declared_in_code(self, values, "defence")
        self.perturbation: EmbeddingPerturbation | None = None
        self.last_losses: list[float] = []  # each pass's loss of the latest step (tests, logging)

    def settings(self) -> dict:
        """What the run's summary and the task model's manifest record."""
        return {"name": self.name, **self.params.model_dump(exclude={"name", "target"})}

    def check(self, adaptation) -> None:
        if not adaptation.trains:
            raise ConfigError(
                f"defence={self.name} with adaptation={adaptation.name}: the adaptation does not "
                f"train, so there is nothing to train adversarially"
            )

    def attach(self, model: nn.Module) -> None:
        if self.perturbation is None:
            self.perturbation = EmbeddingPerturbation(model.backbone)

    def detach(self) -> None:
        if self.perturbation is not None:
            self.perturbation.remove()
            self.perturbation = None

    def step_loss(
        self,
        model: nn.Module,
        batch: dict,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        backward: Callable[[torch.Tensor], None],
        loss_scale: float = 1.0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(the loss to hand back to the optimizer's closure, the mean adversarial loss to log).
        `loss_scale`: PGD's δ-only gradients are taken of the loss times it (a mixed-precision
        scaler's scale, so fp16 gradients do not underflow; the step is normalised anyway)."""
        self.attach(model)
        mask = batch["attention_mask"]
        delta = initial_perturbation(
            mask, self.perturbation.embedding_size, self.params.adv_init_mag, self.params.adv_norm_type
        )
        passes = self.params.adv_k if self.accumulates else self.params.adv_k + 1
        losses = []
        try:
            with rewinding_random_state(self.params.same_dropout_mask and model.training, mask.device) as rewind:
                for k in range(passes):
                    if k:
                        rewind()
                    delta.requires_grad_(True)
                    self.perturbation.delta = delta
                    loss = loss_fn(model(batch), batch["labels"])
                    losses.append(loss.detach())
                    if k == passes - 1:
                        break
                    if self.accumulates:  # FreeLB: this pass's parameter gradients count (1/K each)
                        backward(loss / self.params.adv_k)
                        grad = delta.grad
                    else:  # PGD: δ's gradient only
                        (grad,) = torch.autograd.grad(loss * loss_scale, delta)
                    delta = ascent_step(
                        delta.detach(),
                        grad,
                        mask,
                        self.params.adv_lr,
                        self.params.adv_max_norm,
                        self.params.adv_norm_type,
                    )
        finally:
            self.perturbation.delta = None
        self.last_losses = [float(v) for v in losses]
        final = loss / self.params.adv_k if self.accumulates else loss
        logged = torch.stack(losses).mean() if self.accumulates else losses[-1]
        return final, logged


class FreeLB(AdversarialTraining):
    declaration = FreeLBParams

    name = "freelb"
    accumulates = True


class PGD(AdversarialTraining):
    declaration = PGDParams

    name = "pgd"
    accumulates = False


def build_defence(node):
    """The defence a `defence` config node names (None: plain training): an AdversarialTraining
    here (the training step), or attacks/augmentation.py's AttackAugmentation (the training data)."""
    if node is None:
        return None
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    args = OmegaConf.to_container(node, resolve=True) if not isinstance(node, dict) else dict(node)
    args.pop("name", None)
    return instantiate(args)

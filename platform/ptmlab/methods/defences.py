"""`defence`: one declaration per defence class (lightning_modules/adaptation/adversarial.py:
FreeLB, PGD-K in embedding space; lightning_modules/attacks/augmentation.py: training on
attack-augmented data). Where a defence may go (a fine-tune whose adaptation trains) is a
cross-group check, ptmlab.config_schema.defence's."""

from __future__ import annotations

from typing import Literal

from ptmlab.methods.fields import Name, NonNegativeFloat, PositiveInt, TargetNode


class FreeLBParams(TargetNode):
    """FreeLB (Zhu et al. 2020): `adv_k` ascent steps on a perturbation of the input embeddings, the
    parameters' gradients accumulated over the K passes. Defaults: the authors' SST-2 recipe
    (huggingface-transformers/launch/run_glue.sh of github.com/zhuchen03/FreeLB)."""

    name: Name
    adv_k: PositiveInt = 2  # K: ascent steps (= forward/backward passes) per training step
    adv_lr: NonNegativeFloat = 0.1  # step size of each ascent step, on the normalised gradient
    adv_init_mag: NonNegativeFloat = 0.6  # initial perturbation's magnitude (l2: per example; linf: per coordinate)
    adv_max_norm: NonNegativeFloat = 0.0  # radius of the ball δ is projected onto, per example; 0: unbounded
    adv_norm_type: Literal["l2", "linf"] = "l2"
    same_dropout_mask: bool = True  # one dropout mask for all K passes of a step (FreeLB §3.3)


class PGDParams(FreeLBParams):
    """PGD-K (Madry et al. 2018) in embedding space: `adv_k` ascent steps on the perturbation (its
    gradient only), then the parameters' step on the last, worst one (adv_k + 1 passes). Defaults:
    the FreeLB authors' vanilla-PGD SST-2 runs
    (fairseq-RoBERTa/launch/VanillaPGD/stdadv-sst-fp32-clip.sh)."""

    adv_init_mag: NonNegativeFloat = 1.0
    adv_max_norm: NonNegativeFloat = 0.6


class AttackAugmentationParams(TargetNode):
    """Training on attack-augmented data: the training split extended with the adversarial examples
    an attack found on it, each with its gold label."""

    name: Name
    source: Name  # the run folder of a stage=attack run on this task's training split
    include_failed: bool = False  # also add the perturbed texts of attacks that did not flip the prediction
    max_examples: PositiveInt | None = None  # add at most this many (in the records' order); null: all


_D = "lightning_modules.adaptation.adversarial."
DEFENCES = {
    _D + "FreeLB": FreeLBParams,
    _D + "PGD": PGDParams,
    "lightning_modules.attacks.augmentation.AttackAugmentation": AttackAugmentationParams,
}

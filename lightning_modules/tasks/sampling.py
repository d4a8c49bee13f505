"""Which task a multi-task training step trains on (MT-DNN, Liu et al. 2019; temperature
sampling as in Arivazhagan et al. 2019 / T5).

A task of n_t training examples is drawn with probability p_t ∝ n_t^(1/T):
T = 1 is proportional to dataset size (MT-DNN), T = 2 flattens it, T → ∞ is uniform.
Pure and seeded: the same sizes, temperature and seed give the same sequence of tasks.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping

from ptmlab.contracts import ConfigError

SAMPLING_MODES = ("proportional", "temperature", "uniform")


def temperature_for(mode: str, temperature: float | None = None) -> float:
    """The temperature a `stage.sampling` mode stands for (uniform: infinity)."""
    if mode == "proportional":
        return 1.0
    if mode == "uniform":
        return math.inf
    if mode == "temperature":
        if temperature is None:
            raise ConfigError("stage.sampling=temperature needs stage.temperature")
        return float(temperature)
    raise ConfigError(f"stage.sampling={mode} is unknown; valid: {', '.join(SAMPLING_MODES)}")


def sampling_probabilities(sizes: Mapping[str, int], temperature: float = 1.0) -> dict[str, float]:
    """p_t ∝ n_t^(1/T), in the order of `sizes`."""
    if not sizes:
        raise ConfigError("multi-task sampling needs at least one task")
    if not temperature > 0:
        raise ConfigError(f"stage.temperature={temperature} must be > 0")
    for name, n in sizes.items():
        if int(n) <= 0:
            raise ConfigError(f"task {name} has {n} training examples; multi-task sampling needs > 0")
    exponent = 0.0 if math.isinf(temperature) else 1.0 / float(temperature)
    # log-space: n^(1/T) for large n and small T stays finite
    logs = {name: exponent * math.log(int(n)) for name, n in sizes.items()}
    top = max(logs.values())
    weights = {name: math.exp(v - top) for name, v in logs.items()}
    total = sum(weights.values())
    return {name: w / total for name, w in weights.items()}


class TaskSampler:
    """Draws task names i.i.d. from `sampling_probabilities(sizes, temperature)`."""

    def __init__(self, sizes: Mapping[str, int], temperature: float = 1.0, seed: int = 0):
        self.probabilities = sampling_probabilities(sizes, temperature)
        self.names = list(self.probabilities)
        self.seed = int(seed)
        self._cumulative = []
        acc = 0.0
        for name in self.names:
            acc += self.probabilities[name]
            self._cumulative.append(acc)

    def iterate(self, num_steps: int) -> Iterator[str]:
        """The task of each of `num_steps` steps; a fresh generator starts from the seed again."""
        rng = random.Random(self.seed)
        weights = self._cumulative
        for _ in range(int(num_steps)):
            yield rng.choices(self.names, cum_weights=weights, k=1)[0]

    def draw(self, num_steps: int) -> list[str]:
        return list(self.iterate(num_steps))

"""Multi-task fine-tuning (MT-DNN style): the task sampler's proportions and determinism."""

from __future__ import annotations

import math
from collections import Counter

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


@pytest.mark.parametrize(("sizes", "temperature", "mode", "fragment"), [
    ({}, 1.0, "proportional", "at least one task"),
    ({"rte": 0}, 1.0, "proportional", "task rte has 0"),
    ({"rte": 3}, -1.0, "temperature", "stage.temperature=-1.0"),
    ({"rte": 3}, 1.0, "annealed", "stage.sampling=annealed"),
])
def test_bad_sampling_config_is_one_line(sizes, temperature, mode, fragment):
    with pytest.raises(ConfigError, match=fragment):
        sampling_probabilities(sizes, temperature_for(mode, temperature))

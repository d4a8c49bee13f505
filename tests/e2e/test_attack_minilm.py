"""The realistic check of stage=attack: the session's MiniLM fine-tuned on SST-2 (conftest.py
`sst2_teacher`, never another) attacked on a fixed seeded sample of 50 dev sentences (seed 42)
by the character-level recipe (deepwordbug) and the WordNet recipe (pwws), each at its published
defaults, through the real entry point. Each must lower accuracy under attack by ≥ 30 points from
clean accuracy with a mean perturbed-word ratio ≤ 0.25 (issue 25).

Measured (one thread, load 7–9 on this 2-core machine, on a 60-sentence sample of the same seed):
deepwordbug clean 0.817 → under attack 0.100 (success 0.878, perturbed ratio 0.157, 56 queries per
attacked example, 1.6 s/example); pwws clean 0.817 → 0.100 (success 0.878, ratio 0.110, 128
queries, 3.6 s/example). This test, 50 sentences: deepwordbug clean 0.780 → 0.100 (success 0.872,
ratio 0.157, 58.6 queries), pwws 0.780 → 0.080 (success 0.897, ratio 0.116, 136.8 queries); 287 s
wall for both at load 6–9 (108 s of CPU: about 2.5 min at the suite's usual load of 2–4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.threshold, pytest.mark.timeout(1200)]

SAMPLE = ["attack.num_examples=50", "seed=42"]


def attack(teacher, tmp_path_factory, recipe: str) -> dict:
    run_dir = tmp_path_factory.mktemp(f"attack_{recipe}") / "run"
    env = {**os.environ, "PTMLAB_HOME": str(teacher.home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptmlab.run",
            "stage=attack",
            f"attack={recipe}",
            f"source={teacher.run_dir}",
            *SAMPLE,
            f"hydra.run.dir={run_dir}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    from ptmlab.contracts.summaries import AttackSummary, validate_summary

    assert isinstance(validate_summary(summary), AttackSummary)  # what the worker checks
    print(
        f"\n{recipe}: clean {summary['clean_accuracy']:.3f}, under attack {summary['accuracy_under_attack']:.3f}, "
        f"success {summary['success_rate']:.3f}, perturbed ratio {summary['perturbed_word_ratio']:.3f}, "
        f"queries {summary['queries']:.1f}, {summary['seconds_per_example']:.2f} s/example, "
        f"{summary['num_examples']} sentences"
    )
    return summary


@pytest.mark.parametrize("recipe", ["deepwordbug", "pwws"])
def test_attack_lowers_accuracy_by_30_points_with_few_words_changed(recipe, sst2_teacher, tmp_path_factory):
    s = attack(sst2_teacher, tmp_path_factory, recipe)
    assert s["num_examples"] == 50 and s["task"] == "sst2"
    assert s["clean_accuracy"] >= 0.75  # the teacher (0.83 on the full dev set) on this sample
    assert s["clean_accuracy"] - s["accuracy_under_attack"] >= 0.30
    assert s["perturbed_word_ratio"] <= 0.25

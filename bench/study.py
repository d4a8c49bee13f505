"""Hyperparameter studies (issue 26): training steps an ASHA study spends to reach the grid's best
score within 1 point, ÷ the steps the grid itself spends to get there — goal ≤ 0.5, median over
seeds. Per seed, both run side by side through the platform as it runs for a user: a fresh
SQLite database, two real (warm) `ptmlab worker` processes, the ASHA study (random search, 16 trials, 2 in
parallel, reduction factor 4) and the 16-point grid (4 learning rates × 4 batch sizes) queued
together. The fine-tune and its space are tests/platform/study_task.py's, as in the suite's
test_asha_study_matches_the_grid_with_at_most_60_percent_of_its_steps: a generated polarity task
whose dev accuracy rises over 8 epochs at a speed set by the learning rate, bert_tiny from random
weights. A seed is the sampler's and every trial's training seed (the grid is rerun per seed).

"Steps to reach" is counted in the order trials ended: the steps of every trial that had ended
(pruned trials with the steps they reached) when the first trial within 1 point of the grid's
best completed. A study that never gets there counts all its steps and is flagged.

    .venv/bin/python bench/study.py [--seeds 0,1,2] [--stage finetune|sleep] [--json out.json]

`--stage sleep` runs the same comparison on the torch-free stage's made-up learning curves (a
check of the machinery in about a minute a seed); the fine-tune took 17 minutes a seed on 2 CPU
cores at a load of about 12. PTMLAB_DATA_DIR is not needed (the task is generated).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "platform"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "platform"))

import study_task

ARMS = {
    "finetune": {
        "objective": study_task.OBJECTIVE,
        "fixed": study_task.fixed_overrides,  # of the generated task's folder
        "space": study_task.SPACE,
        "grid": study_task.GRID,
        "asha": study_task.ASHA,
    },
    "sleep": {
        "objective": "val/score",
        "fixed": lambda _folder: ["stage.seconds=2", "stage.validations=4"],
        "space": ["stage.quality=interval(0.05,1)", "+stage.width=choice(1,2,3,4)"],
        "grid": ["stage.quality=choice(0.05,0.35,0.65,0.95)", "+stage.width=choice(1,2,3,4)"],
        "asha": {"sampler": "tpe", "pruner": "asha", "reduction_factor": 3},
    },
}


def steps_to_reach(status: dict, target: float) -> tuple[int, bool]:
    """Steps of the trials ended (job order) until the first complete one scoring >= target."""
    trials = sorted((t for t in status["trials"] if t["job_id"] is not None), key=lambda t: t["finished_order"])
    spent = 0
    for t in trials:
        spent += t["steps"]
        if t["state"] == "complete" and t["value"] is not None and t["value"] >= target:
            return spent, True
    return spent, False


def run_seed(seed: int, stage: str) -> dict:
    import sqlalchemy as sa

    from ptmlab import studies
    from ptmlab.db import Job, dispose_engines, get_sessionmaker

    arm = ARMS[stage]
    with tempfile.TemporaryDirectory(prefix="bench-study-") as tmp:
        url = f"sqlite:///{tmp}/platform.db"
        fixed = arm["fixed"](study_task.write_polarity_task(Path(tmp) / "polarity"))
        common = {"stage": stage, "objective": arm["objective"], "n_trials": 16, "n_parallel": 2, "job_seed": seed}
        asha_plan = studies.plan_study(
            studies.StudySpec(**common, **arm["asha"], name="asha", seed=seed, overrides=[*fixed, *arm["space"]])
        )
        grid_plan = studies.plan_study(
            studies.StudySpec(**common, name="grid", sampler="grid", seed=seed, overrides=[*fixed, *arm["grid"]])
        )
        Session = get_sessionmaker(url)
        with Session() as s:
            ids = [studies.create_study(s, p, url=url, driver_id="bench").id for p in (asha_plan, grid_plan)]
        env = {**os.environ, "PTMLAB_HOME": f"{tmp}/home", "PTMLAB_DATABASE_URL": url, "OMP_NUM_THREADS": "1"}
        workers = [
            subprocess.Popen(
                [sys.executable, "-m", "ptmlab.cli", "worker", "--poll-s", "0.2"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
            for _ in range(2)
        ]
        started = time.monotonic()
        try:
            while True:
                with Session() as s:
                    states = [studies.get_study(s, i).status for i in ids]
                if all(state == "finished" for state in states):
                    break
                time.sleep(2)
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait(timeout=60)
        with Session() as s:
            asha, grid = (studies.study_status(s, i, url=url) for i in ids)
            ended = {j.id: (j.finished_at, j.id) for j in s.scalars(sa.select(Job))}
        for status in (asha, grid):
            for t in status["trials"]:
                t["finished_order"] = ended.get(t["job_id"], (None, 0))
        dispose_engines()
    target = grid["best"]["value"] - 0.01
    asha_steps, asha_reached = steps_to_reach(asha, target)
    grid_steps, _ = steps_to_reach(grid, target)
    return {
        "seed": seed,
        "grid_best": grid["best"]["value"],
        "asha_best": asha["best"]["value"],
        "asha_steps_to_reach": asha_steps,
        "asha_reached": asha_reached,
        "grid_steps_to_reach": grid_steps,
        "ratio": asha_steps / max(grid_steps, 1),
        "total_ratio": asha["steps_total"] / max(grid["steps_total"], 1),
        "asha_steps_total": asha["steps_total"],
        "grid_steps_total": grid["steps_total"],
        "asha_counts": asha["counts"],
        "wall_s": round(time.monotonic() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--stage", choices=sorted(ARMS), default="finetune")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        row = run_seed(seed, args.stage)
        rows.append(row)
        print(
            f"seed {seed}: grid best {row['grid_best']:.3f}, ASHA best {row['asha_best']:.3f}; steps to within "
            f"1 pt: ASHA {row['asha_steps_to_reach']}{'' if row['asha_reached'] else ' (never reached)'} / grid "
            f"{row['grid_steps_to_reach']} = {row['ratio']:.2f}; steps in all {row['asha_steps_total']} / "
            f"{row['grid_steps_total']}; {row['asha_counts']}; {row['wall_s']} s",
            flush=True,
        )
    median = statistics.median(r["ratio"] for r in rows)
    print(
        f"ASHA ÷ grid, steps to reach the grid's best within 1 point: median {median:.2f} over "
        f"{len(rows)} seed(s) (goal <= 0.5); all steps: median "
        f"{statistics.median(r['total_ratio'] for r in rows):.2f} (the suite's test: <= 0.6)"
    )
    if args.json:
        args.json.write_text(json.dumps({"stage": args.stage, "median_ratio": median, "seeds": rows}, indent=2))


if __name__ == "__main__":
    main()

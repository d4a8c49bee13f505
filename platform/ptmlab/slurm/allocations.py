"""Workers as Slurm allocations: `ptmlab slurm workers | status | stop`.

Each allocation is one batch job whose script `exec`s `ptmlab worker`, so the worker is the batch
step's main process and gets Slurm's signals itself:
- `--signal=B:USR1@<warn_s>`: the time limit (or a pre-emption) is near — stop claiming, give
  running jobs `--grace-s`, then hand them back to the queue (they rerun with `resume=true` from
  their last checkpoint on whichever worker claims them next);
- `scancel` (SIGTERM to the job's processes): the same, at once.
The worker hands out the GPUs Slurm granted (CUDA_VISIBLE_DEVICES inside the allocation) and
registers with its Slurm job id, node and end time, so the dashboard's workers view shows them.

Before anything is submitted, `sbatch --test-only` checks the request against the cluster: a bad
partition or a request it cannot satisfy is refused with Slurm's message.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ptmlab.errors import ConfigError
from ptmlab.slurm.commands import run_slurm

JOB_NAME = "ptmlab-worker"
SQUEUE_FORMAT = "%i|%j|%T|%N|%L|%P|%r"  # id, name, state, nodes, time left, partition, reason


@dataclass
class WorkerAllocationSpec:
    """What one worker allocation asks Slurm for, and how its worker runs."""

    partition: str | None = None
    gpus_per_node: int = 0
    cpus: int = 1  # CPU cores for the worker and its CPU jobs
    cpu_slots: int | None = None  # CPU jobs at once (default: 1 when the allocation has GPUs, else cpus)
    time: str = "24:00:00"  # Slurm's --time
    queues: list[str] = field(default_factory=lambda: ["default"])
    warn_s: int = 120  # USR1 this long before the time limit
    grace_s: float = 60.0  # running jobs' time to finish after USR1/SIGTERM before requeueing
    lease_s: float = 30.0
    burst: bool = False  # exit when nothing is claimable (tests, draining a backlog)
    log_dir: Path = Path(".")
    python: str = sys.executable
    extra_sbatch: list[str] = field(default_factory=list)

    def sbatch_options(self) -> list[str]:
        if self.cpus < 1:
            raise ConfigError(f"--cpus={self.cpus} must be >= 1")
        if self.gpus_per_node < 0:
            raise ConfigError(f"--gpus-per-node={self.gpus_per_node} must be >= 0")
        opts = [
            f"--job-name={JOB_NAME}",
            "--nodes=1",
            "--ntasks=1",
            f"--cpus-per-task={self.cpus}",
            f"--time={self.time}",
            f"--signal=B:USR1@{self.warn_s}",
            "--no-requeue",
            f"--output={self.log_dir}/worker-%j.log",
        ]
        if self.partition:
            opts.append(f"--partition={self.partition}")
        if self.gpus_per_node:
            opts.append(f"--gpus-per-node={self.gpus_per_node}")
        return [*opts, *self.extra_sbatch]

    def script(self) -> str:
        slots = self.cpu_slots if self.cpu_slots is not None else (1 if self.gpus_per_node else self.cpus)
        worker = [
            self.python,
            "-m",
            "ptmlab.cli",
            "worker",
            "--queues",
            ",".join(self.queues),
            "--cpu-slots",
            str(slots),
            "--grace-s",
            f"{self.grace_s:g}",
            "--lease-s",
            f"{self.lease_s:g}",
        ]
        if self.gpus_per_node:
            worker += ["--gpus", "slurm"]  # the ids Slurm granted, read from CUDA_VISIBLE_DEVICES
        if self.burst:
            worker.append("--burst")
        lines = [
            "#!/bin/bash",
            *(f"#SBATCH {o}" for o in self.sbatch_options()),
            "# The platform's settings (PTMLAB_*, MLFLOW_TRACKING_URI) come with the submitting environment",
            "# (sbatch --export=ALL); exec makes the worker the process Slurm signals.",
            "exec " + shlex.join(worker),
        ]
        return "\n".join(lines) + "\n"


def submit_workers(spec: WorkerAllocationSpec, count: int) -> list[str]:
    """Check the request with `sbatch --test-only`, then submit `count` allocations; their ids."""
    if count < 1:
        raise ConfigError(f"--nodes={count} must be >= 1")
    spec.log_dir.mkdir(parents=True, exist_ok=True)
    script = spec.script()
    run_slurm(["sbatch", "--test-only", *spec.sbatch_options()], input_text=script, what="sbatch --test-only")
    ids = []
    for _ in range(count):
        out = run_slurm(["sbatch", "--parsable"], input_text=script, what="sbatch")
        ids.append(out.strip().split(";")[0])  # `<id>[;<cluster>]`
    return ids


@dataclass
class AllocationRow:
    job_id: str
    name: str
    state: str
    nodes: str
    time_left: str
    partition: str
    reason: str


def list_allocations(job_ids: list[str] | None = None) -> list[AllocationRow]:
    """The cluster's ptmlab worker allocations (pending and running)."""
    argv = ["squeue", "-h", f"--name={JOB_NAME}", "-o", SQUEUE_FORMAT]
    if job_ids:
        argv.append("--jobs=" + ",".join(job_ids))
    rows = []
    for line in run_slurm(argv, what="squeue").splitlines():
        parts = line.split("|")
        if len(parts) == 7:
            rows.append(AllocationRow(*parts))
    return rows


def stop_allocations(job_ids: list[str], *, now: bool = False) -> None:
    """Drain (SIGTERM to the worker: requeue its jobs, exit) or, with `now`, cancel outright."""
    if not job_ids:
        return
    argv = ["scancel", *job_ids] if now else ["scancel", "--batch", "--signal=TERM", *job_ids]
    run_slurm(argv, what="scancel")

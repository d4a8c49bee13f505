"""The Slurm command line, and what a process learns from its allocation's environment."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from dataclasses import dataclass

from ptmlab.errors import ConfigError

SLURM_TIMEOUT_S = 60.0


def run_slurm(argv: list[str], *, input_text: str | None = None, what: str = "") -> str:
    """Run a Slurm client command and return its stdout. A missing command or a refusal is one
    ConfigError carrying Slurm's own message (e.g. `sbatch: error: invalid partition specified: gpu`)."""
    if shutil.which(argv[0]) is None:
        raise ConfigError(
            f"{argv[0]} not found: ptmlab's Slurm commands need the Slurm client tools on PATH "
            "(Debian: apt-get install slurm-client) and SLURM_CONF pointing at the cluster"
        )
    try:
        proc = subprocess.run(argv, input=input_text, capture_output=True, text=True, timeout=SLURM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{argv[0]} gave no answer in {SLURM_TIMEOUT_S:g} s: is slurmctld running?") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        # Slurm prints the reason first and a generic "submission failed" after it: keep both, one line.
        message = "; ".join(lines[-2:]) or f"exit code {proc.returncode}"
        raise ConfigError(f"{what or argv[0]} refused by Slurm: {message}")
    return proc.stdout


@dataclass(frozen=True)
class SlurmAllocation:
    """The Slurm allocation this process runs in (from the variables Slurm sets)."""

    job_id: str
    node: str | None
    ends_at: dt.datetime | None  # naive UTC, like the platform database


def current_allocation(environ: dict[str, str] | None = None) -> SlurmAllocation | None:
    env = os.environ if environ is None else environ
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        return None
    return SlurmAllocation(job_id=job_id, node=env.get("SLURMD_NODENAME"), ends_at=_end_time(job_id))


def _end_time(job_id: str) -> dt.datetime | None:
    """The allocation's end (its time limit): Slurm sets no variable for it, squeue knows."""
    try:
        out = run_slurm(["squeue", "-h", "-j", job_id, "-o", "%e"], what="squeue")
    except ConfigError:
        return None
    return parse_slurm_time(out.strip())


def parse_slurm_time(text: str) -> dt.datetime | None:
    """`2026-11-23T04:20:45` (the controller's local time) -> naive UTC; None for Unknown/N/A/None."""
    try:
        local = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return local.astimezone(dt.UTC).replace(tzinfo=None)


def srun_prefix(
    *,
    job_id: int,
    attempt: int,
    nodes: int,
    tasks_per_node: int,
    gpus_per_node: int,
    log_dir: str,
    extra: list[str] | None = None,
) -> list[str]:
    """`srun ...` that runs one job's command across `nodes` hosts, one task per device, each
    task's output in its own file (`attempt-<n>-node-<i>-task-<t>.log`, i = the node's index in
    the step: host names may repeat, e.g. several slurmd on one host). Lightning reads the ranks
    and the master address from the variables srun sets (its SLURMEnvironment)."""
    argv = [
        "srun",
        f"--job-name=ptmlab-job-{job_id}",
        f"--nodes={nodes}",
        f"--ntasks-per-node={tasks_per_node}",
        "--kill-on-bad-exit=1",
        f"--output={log_dir}/attempt-{attempt}-node-%n-task-%t.log",
    ]
    if gpus_per_node:
        argv.append(f"--gpus-per-node={gpus_per_node}")
    return [*argv, *(extra or [])]

"""Starting a job's process: `python -m ptmlab.run <overrides>` (an argument list, never a shell)
in its own session, with the job's environment and its attempt's log as stdout/stderr; forked from
the warm launcher when it can be (worker/warm_start.py), under `srun` across hosts when nodes > 1.
The child dies with the worker (PR_SET_PDEATHSIG on Linux)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ptmlab.joblog import command_line
from ptmlab.queue import ClaimedJob
from ptmlab.slurm import srun_prefix
from ptmlab.worker.outcome import SUMMARY_FILE
from ptmlab.worker.warm_start import WarmLauncher, WarmProcess


def die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def job_argv(python: str, claim: ClaimedJob) -> list[str]:
    return [python, "-m", "ptmlab.run", *claim.run_overrides()]


def job_environment(home: Path) -> dict[str, str]:
    from ptmlab.settings import get_settings

    data_dir = get_settings().data_dir
    return {
        # The API token is the platform's, not the job's: a job's log never holds it. Inside a
        # Slurm allocation the job is one process of the worker's, not a Slurm task: without
        # SLURM_* Lightning neither takes ranks from them nor requeues the worker's allocation.
        **{
            k: v
            for k, v in os.environ.items()
            if k != "PTMLAB_API_TOKEN" and not (k.startswith("SLURM_") and k != "SLURM_CONF")
        },
        "CUDA_VISIBLE_DEVICES": "",
        "PTMLAB_HOME": str(home),
        # Absolute: the job runs in PTMLAB_HOME (ptmlab.run), not where the worker started.
        **({"PTMLAB_DATA_DIR": str(Path(data_dir).expanduser().resolve())} if data_dir else {}),
        "PYTHONUNBUFFERED": "1",
    }


def across_nodes(
    claim: ClaimedJob, argv: list[str], env: dict[str, str], srun_args: list[str]
) -> tuple[list[str], dict]:
    """The job's command under `srun` on `nodes` hosts, one task per GPU (one per node on CPU);
    Lightning's trainer is told the same geometry, so its SLURM environment checks agree."""
    per_node = max(claim.gpus, 1)
    prefix = srun_prefix(
        job_id=claim.job_id,
        attempt=claim.attempt_number,
        nodes=claim.nodes,
        tasks_per_node=per_node,
        gpus_per_node=claim.gpus,
        log_dir=str(Path(claim.log_path).parent),
        extra=srun_args,
    )
    # `++`: trainer configs need not name num_nodes (Lightning's default is 1).
    geometry = [f"++trainer.num_nodes={claim.nodes}", f"++trainer.devices={per_node}"]
    env = {k: v for k, v in env.items() if k != "CUDA_VISIBLE_DEVICES"}  # Slurm sets it on each node
    return [*prefix, *argv, *geometry], env


def open_job_log(claim: ClaimedJob, argv: list[str], worker_id: str):
    """The attempt's log opened for appending, its header written (OSError: the job's folder cannot
    be written)."""
    # Made again if it was deleted while the job was queued.
    Path(claim.run_dir).mkdir(parents=True, exist_ok=True)
    # A summary left by an earlier attempt must not pass for this attempt's.
    (Path(claim.run_dir) / SUMMARY_FILE).unlink(missing_ok=True)
    log_path = Path(claim.log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    out = open(log_path, "ab")
    try:
        out.write(
            f"== job {claim.job_id} attempt {claim.attempt_number} on {worker_id} "
            f"at {time.strftime('%Y-%m-%d %H:%M:%S')}\n== {command_line(argv)}\n".encode()
        )
        out.flush()
    except OSError:
        out.close()
        raise
    return out


def warm_start(launcher: WarmLauncher | None, claim: ClaimedJob, env: dict[str, str], out) -> WarmProcess | None:
    """The job forked from the warm launcher, or None to start it cold (said in its log)."""
    if launcher is None:
        return None
    if claim.gpus or claim.nodes > 1:
        # A GPU job starts cold: what the launcher's imports may have cached about devices
        # (it sees none) must not reach a job that uses them.
        why = "a GPU job" if claim.gpus else "a multi-node job"
    elif not launcher.ready:
        why = launcher.why_not()
    else:
        out.write(f"== warm start: forked from the worker's launcher (pid {launcher.proc.pid})\n".encode())
        out.flush()
        proc = launcher.launch(claim.run_overrides(), env, claim.log_path)
        if proc is not None:
            return proc
        why = launcher.why_not()
    out.write(f"== cold start: {why}\n".encode())
    out.flush()
    return None


def start_cold(argv: list[str], env: dict[str, str], out) -> subprocess.Popen:
    return subprocess.Popen(
        argv,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        preexec_fn=die_with_parent if sys.platform == "linux" else None,
    )

"""ptmlab on a Slurm cluster: workers as Slurm allocations, multi-node jobs through `srun`.

- `allocations.py`: `ptmlab slurm workers|status|stop` — each allocation runs one
  `ptmlab worker` (exec'd, so Slurm's signals reach it) with the GPUs Slurm granted, drains on the
  pre-emption warning (`--signal=B:USR1@<s>`) or `scancel` (SIGTERM) and hands its running jobs
  back to the queue, where they resume from their last checkpoint on another allocation.
- `commands.py`: the Slurm command line (sbatch, squeue, scancel, srun) and what a process learns
  from its allocation's environment. Slurm's own messages are passed on, one line, as ConfigError.

Torch-free, like the rest of the platform half.
"""

from ptmlab.slurm.commands import SlurmAllocation, current_allocation, run_slurm, srun_prefix

__all__ = ["SlurmAllocation", "current_allocation", "run_slurm", "srun_prefix"]

"""`ptmlab slurm workers | status | stop`: ptmlab workers as Slurm allocations (ptmlab.slurm)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cmd_workers(args: argparse.Namespace) -> int:
    from ptmlab.settings import get_settings
    from ptmlab.slurm.allocations import WorkerAllocationSpec, submit_workers

    spec = WorkerAllocationSpec(
        partition=args.partition,
        gpus_per_node=args.gpus_per_node,
        cpus=args.cpus,
        cpu_slots=args.cpu_slots,
        time=args.time,
        queues=[q for q in args.queues.split(",") if q],
        warn_s=args.warn_s,
        grace_s=args.grace_s,
        burst=args.burst,
        log_dir=Path(args.log_dir or get_settings().home / "slurm"),
        extra_sbatch=list(args.sbatch_arg or []),
    )
    if args.dry_run:
        sys.stdout.write(spec.script())
        return 0
    ids = submit_workers(spec, args.nodes)
    print(f"submitted {len(ids)} worker allocation(s): {' '.join(ids)} (logs: {spec.log_dir}/worker-<id>.log)")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from ptmlab.db import get_sessionmaker
    from ptmlab.db.models import Worker
    from ptmlab.settings import get_settings
    from ptmlab.slurm.allocations import list_allocations

    rows = list_allocations()
    url = args.database_url or get_settings().resolved_database_url
    with get_sessionmaker(url)() as s:
        workers = {w.slurm_job_id: w for w in s.scalars(sa.select(Worker).where(Worker.slurm_job_id.is_not(None)))}
    if not rows:
        print("no ptmlab worker allocations in the Slurm queue")
        return 0
    print(f"{'slurm job':<10} {'state':<10} {'node':<12} {'time left':<12} {'partition':<10} worker")
    for r in rows:
        w = workers.get(r.job_id)
        worker = f"{w.id} ({w.status})" if w else (r.reason if r.state == "PENDING" else "-")
        print(f"{r.job_id:<10} {r.state:<10} {r.nodes or '-':<12} {r.time_left:<12} {r.partition:<10} {worker}")
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    from ptmlab.slurm.allocations import list_allocations, stop_allocations

    ids = list(args.job_ids) or [r.job_id for r in list_allocations()]
    if not ids:
        print("no ptmlab worker allocations to stop")
        return 0
    stop_allocations(ids, now=args.now)
    how = "cancelled" if args.now else "asked to drain (running jobs go back to the queue)"
    print(f"{len(ids)} allocation(s) {how}: {' '.join(ids)}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("slurm", help="workers as Slurm allocations: ptmlab slurm workers|status|stop")
    slurm_sub = p.add_subparsers(dest="slurm_command", required=True)
    w = slurm_sub.add_parser("workers", help="submit N worker allocations (one node each)")
    w.add_argument("--nodes", type=int, default=1, help="how many allocations (one worker per node)")
    w.add_argument("--partition", default=None)
    w.add_argument("--gpus-per-node", type=int, default=0)
    w.add_argument("--cpus", type=int, default=1, help="CPU cores per allocation")
    w.add_argument("--cpu-slots", type=int, default=None, help="CPU jobs at once (default: 1 with GPUs, else --cpus)")
    w.add_argument("--time", default="24:00:00", help="Slurm time limit, e.g. 24:00:00")
    w.add_argument("--queues", default="default")
    w.add_argument("--warn-s", type=int, default=120, help="Slurm sends USR1 this long before the time limit")
    w.add_argument(
        "--grace-s",
        type=float,
        default=60.0,
        help="after USR1/scancel, running jobs' time to finish before they go back to the queue",
    )
    w.add_argument("--burst", action="store_true", help="workers exit when nothing is claimable")
    w.add_argument("--log-dir", default=None, help="default: $PTMLAB_HOME/slurm")
    w.add_argument(
        "--sbatch-arg",
        action="append",
        default=None,
        metavar="ARG",
        help="extra sbatch option, e.g. --sbatch-arg=--account=nlp (repeatable)",
    )
    w.add_argument("--dry-run", action="store_true", help="print the batch script, submit nothing")
    w.set_defaults(func=_cmd_workers)
    st = slurm_sub.add_parser("status", help="worker allocations: Slurm state, node, time left, worker")
    st.add_argument("--database-url", default=None)
    st.set_defaults(func=_cmd_status)
    sp = slurm_sub.add_parser("stop", help="drain worker allocations (all, or the given Slurm job ids)")
    sp.add_argument("job_ids", nargs="*")
    sp.add_argument("--now", action="store_true", help="scancel outright instead of draining")
    sp.set_defaults(func=_cmd_stop)

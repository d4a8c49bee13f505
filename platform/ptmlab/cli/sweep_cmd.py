"""`ptmlab sweep`: expand a multirun with Hydra's sweep grammar and queue it as one sweep, straight
into the database."""

from __future__ import annotations

import argparse


def _cmd_sweep(args: argparse.Namespace) -> int:
    from ptmlab import queue
    from ptmlab.api.validation import expand_sweep, validate_sweep_jobs
    from ptmlab.cli.queue_cmds import _session, _wait_for

    combos = expand_sweep(list(args.overrides), max_jobs=args.max_jobs)
    if not args.no_validate:
        # A local user may set anything (no remote-caller restrictions), but every job must compose.
        validate_sweep_jobs(combos, roots=[], check_allowed=False, budget_s=None)
    if args.dry_run:
        print(f"{len(combos)} jobs")
        for c in combos:
            print("  " + " ".join(c))
        return 0
    options = {
        "queue": args.queue,
        "priority": args.priority,
        "gpus": args.gpus,
        "nodes": args.nodes,
        "timeout_s": args.timeout_s,
        "max_attempts": args.max_attempts,
    }
    with _session(args) as s:
        sweep, jobs = queue.submit_sweep(
            s,
            [{**options, "overrides": c} for c in combos],
            name=args.name,
            spec={"overrides": list(args.overrides), **options},
        )
        ids = [j.id for j in jobs]
    print(f"sweep {sweep.id}: {len(ids)} jobs queued ({ids[0]}..{ids[-1]})" if ids else f"sweep {sweep.id}: 0 jobs")
    if args.wait:
        return _wait_for(ids, args)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="queue a multirun: ptmlab sweep stage=sleep seed=range(0,3) --wait")
    p.add_argument("overrides", nargs="+", help="Hydra overrides; a,b / range(a,b) / choice(...) sweep")
    p.add_argument("--dry-run", action="store_true", help="print the count and each job's overrides only")
    p.add_argument("--wait", action="store_true", help="wait for every job, printing progress")
    p.add_argument("--name", default=None)
    p.add_argument("--queue", default="default")
    p.add_argument("--priority", type=int, default=0)
    p.add_argument("--gpus", type=int, default=0, help="GPUs per job (per node when --nodes > 1)")
    p.add_argument("--nodes", type=int, default=1, help="> 1: each job across hosts (see `ptmlab worker --multinode`)")
    p.add_argument("--timeout-s", type=float, default=None)
    p.add_argument("--max-attempts", type=int, default=3)
    p.add_argument("--no-validate", action="store_true", help="skip composing every combination")
    p.add_argument("--max-jobs", type=int, default=10_000, help="refuse a sweep that expands to more jobs")
    p.add_argument("--database-url", default=None, help="default: PTMLAB_DATABASE_URL or SQLite in PTMLAB_HOME")
    p.set_defaults(func=_cmd_sweep)

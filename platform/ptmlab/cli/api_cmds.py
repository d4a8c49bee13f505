"""`ptmlab serve` (the REST API under uvicorn, 127.0.0.1 by default) and `ptmlab sweep` (expand a
multirun with Hydra's sweep grammar and queue it as one sweep, straight into the database)."""

from __future__ import annotations

import argparse


def _cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ptmlab.api.app import create_app
    from ptmlab.settings import get_settings

    settings = get_settings()
    app = create_app(settings)  # migrates before the port opens
    uvicorn.run(app, host=args.host or settings.bind_host, port=args.port or settings.bind_port,
                log_level=args.log_level)
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from ptmlab import queue
    from ptmlab.api.validation import expand_sweep, validate_sweep_jobs
    from ptmlab.cli.queue_cmds import _session, _wait_for

    combos = expand_sweep(list(args.overrides))
    if not args.no_validate:
        # A local user may set anything (no remote-caller restrictions), but every job must compose.
        validate_sweep_jobs(combos, roots=[], check_allowed=False)
    if args.dry_run:
        print(f"{len(combos)} jobs")
        for c in combos:
            print("  " + " ".join(c))
        return 0
    options = {"queue": args.queue, "priority": args.priority, "gpus": args.gpus, "timeout_s": args.timeout_s,
               "max_attempts": args.max_attempts}
    with _session(args) as s:
        sweep, jobs = queue.submit_sweep(s, [{**options, "overrides": c} for c in combos], name=args.name,
                                         spec={"overrides": list(args.overrides), **options})
        ids = [j.id for j in jobs]
    print(f"sweep {sweep.id}: {len(ids)} jobs queued ({ids[0]}..{ids[-1]})" if ids else f"sweep {sweep.id}: 0 jobs")
    if args.wait:
        return _wait_for(ids, args)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="the REST API (uvicorn): ptmlab serve --port 8765")
    p.add_argument("--host", default=None, help="default: PTMLAB_BIND_HOST (127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="default: PTMLAB_BIND_PORT (8765)")
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser("sweep", help="queue a multirun: ptmlab sweep stage=sleep seed=range(0,3) --wait")
    p.add_argument("overrides", nargs="+", help="Hydra overrides; a,b / range(a,b) / choice(...) sweep")
    p.add_argument("--dry-run", action="store_true", help="print the count and each job's overrides only")
    p.add_argument("--wait", action="store_true", help="wait for every job, printing progress")
    p.add_argument("--name", default=None)
    p.add_argument("--queue", default="default")
    p.add_argument("--priority", type=int, default=0)
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--timeout-s", type=float, default=None)
    p.add_argument("--max-attempts", type=int, default=3)
    p.add_argument("--no-validate", action="store_true", help="skip composing every combination")
    p.add_argument("--database-url", default=None, help="default: PTMLAB_DATABASE_URL or SQLite in PTMLAB_HOME")
    p.set_defaults(func=_cmd_sweep)

"""Queue commands: `ptmlab worker | submit | status | logs | cancel | retry | label`.

They talk to the platform database directly (PTMLAB_DATABASE_URL, default SQLite in
PTMLAB_HOME), so they work on any host that reaches it, with or without the API running.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _parse_gpus(text: str | None) -> list[int]:
    if text == "slurm":  # the GPUs of the Slurm allocation this worker runs in
        text = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if not text:
        return []
    try:
        return [int(g) for g in text.split(",") if g.strip()]
    except ValueError:
        from ptmlab.errors import ConfigError

        raise ConfigError(f"--gpus {text!r}: expected comma-separated GPU indices like 0,1") from None


def _session(args):
    from ptmlab.db import get_sessionmaker

    return get_sessionmaker(getattr(args, "database_url", None))()


def _parse_ids(text: str | None) -> list[int]:
    from ptmlab.errors import ConfigError

    try:
        return [int(x) for x in (text or "").split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--after {text!r}: expected comma-separated job ids like 3,4") from None


# -- worker -------------------------------------------------------------------------------------
def _cmd_worker(args: argparse.Namespace) -> int:
    import logging

    from ptmlab.worker import WorkerAgent, WorkerOptions

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    gpus = _parse_gpus(args.gpus)
    cpu_slots = args.cpu_slots if args.cpu_slots is not None else 1
    options = WorkerOptions(
        gpus=gpus,
        queues=[q for q in args.queues.split(",") if q],
        cpu_slots=cpu_slots,
        lease_s=args.lease_s,
        poll_s=args.poll_s,
        grace_s=args.grace_s,
        burst=args.burst,
        max_jobs=args.max_jobs,
        database_url=args.database_url,
        worker_id=args.worker_id,
        multinode=args.multinode,
        srun_args=list(args.srun_arg or []),
        warm_start=not args.cold_start,
    )
    return WorkerAgent(options).run()


# -- submit -------------------------------------------------------------------------------------
def tag_options(items: list[str] | None) -> dict[str, str]:
    """`--tag key=value` (repeatable) of submit and label; a bad one is one line naming it."""
    from ptmlab.errors import ConfigError

    tags = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--tag {item!r} is not key=value")
        tags[key] = value
    return tags


def _cmd_submit(args: argparse.Namespace) -> int:
    from ptmlab import queue
    from ptmlab.config import compose_config

    overrides = list(args.overrides)
    tags = tag_options(args.tag)
    with _session(args) as s:
        if args.pipeline:
            expanded = queue.expand_pipeline(args.pipeline, overrides)
            if not args.no_validate:
                for pj in expanded:
                    compose_config([*([f"stage={pj.stage}"] if pj.stage else []), *pj.overrides])
            pipeline, jobs = queue.submit_pipeline(s, args.pipeline, overrides=overrides, tags=tags)
            print(f"pipeline {pipeline.id} ({pipeline.name}): {len(jobs)} jobs queued")
            for j in jobs:
                after = f" after {','.join(map(str, j.parent_ids))}" if j.parent_ids else ""
                print(f"  job {j.id}  {j.name}{after}")
        else:
            if not args.no_validate:
                compose_config(overrides)
            job = queue.submit_job(
                s,
                overrides=overrides,
                queue=args.queue,
                priority=args.priority,
                gpus=args.gpus,
                nodes=args.nodes,
                timeout_s=args.timeout_s,
                max_attempts=args.max_attempts,
                depends_on=_parse_ids(args.after),
                idempotency_key=args.idempotency_key,
                name=args.name,
                tags=tags,
            )
            jobs = [job]
            print(f"job {job.id} {job.status}: stage={job.stage} {' '.join(job.overrides)}")
    if args.wait:
        return _wait_for([j.id for j in jobs], args)
    return 0


def _wait_for(job_ids: list[int], args) -> int:
    """One line per job (name, bar, step/total, loss, ETA) until all have ended; with many jobs the
    running and failed ones are drawn and the rest counted."""
    from ptmlab import queue
    from ptmlab.cli.progress_bars import ProgressBoard
    from ptmlab.db import FAILED, RUNNING, SUCCEEDED, TERMINAL_STATES

    board = ProgressBoard(tty=None if len(job_ids) <= 20 else False)  # redrawn in place unless counts follow
    while True:
        with _session(args) as s:
            jobs = [queue.get_job(s, j).to_dict() for j in job_ids]
        shown = jobs if len(jobs) <= 20 else [j for j in jobs if j["status"] in (RUNNING, FAILED)][:20]
        board.draw(shown)
        states = [j["status"] for j in jobs]
        if len(jobs) > 20:
            counts = ", ".join(f"{states.count(st)} {st}" for st in sorted(set(states)))
            print(f"[{time.strftime('%H:%M:%S')}] {counts}", flush=True)
        if all(v in TERMINAL_STATES for v in states):
            return 0 if all(v == SUCCEEDED for v in states) else 1
        time.sleep(1.0)


# -- status -------------------------------------------------------------------------------------
def _cmd_status(args: argparse.Namespace) -> int:
    from ptmlab import queue

    with _session(args) as s:
        if args.workers:
            workers = queue.list_workers(s)
            if args.json:
                print(json.dumps([w.to_dict() for w in workers], indent=2))
                return 0
            for w in workers:
                print(
                    f"{w.id:<40} {w.status:<9} gpus={','.join(map(str, w.gpus)) or '-':<8} "
                    f"cpu_slots={w.cpu_slots} queues={','.join(w.queues)} last heartbeat {w.last_heartbeat:%H:%M:%S}"
                )
            return 0
        if args.job_id is not None:
            job = queue.get_job(s, args.job_id)
            attempts = queue.list_attempts(s, args.job_id)
            if args.json:
                print(json.dumps({**job.to_dict(), "attempt_rows": [a.to_dict() for a in attempts]}, indent=2))
                return 0
            from ptmlab.cli.progress_bars import progress_text

            d = job.to_dict()
            for key in (
                "id",
                "name",
                "status",
                "stage",
                "overrides",
                "seed",
                "queue",
                "priority",
                "gpus",
                "depends_on",
                "attempts",
                "worker_id",
                "run_dir",
                "mlflow_run_id",
                "exit_code",
                "error",
            ):
                if d.get(key) not in (None, [], ""):
                    print(f"{key:>14}: {d[key]}")
            if d.get("progress"):
                print(f"{'progress':>14}: {progress_text(d['progress'], d['status'])}")
                if d["progress"].get("metrics"):
                    print(f"{'metrics':>14}: " + "  ".join(f"{k} {v:.4g}" for k, v in d["progress"]["metrics"].items()))
            for a in attempts:
                print(
                    f"  attempt {a.number}: {a.status:<9} worker={a.worker_id} exit={a.exit_code} "
                    f"started={a.started_at:%H:%M:%S} log={a.log_path}"
                )
            return 0
        jobs, total = queue.list_jobs(
            s, status=args.status, sweep_id=args.sweep, pipeline_id=args.pipeline, limit=args.limit
        )
        if args.json:
            print(json.dumps({"total": total, "jobs": [j.to_dict() for j in jobs]}, indent=2))
            return 0
        from ptmlab.cli.progress_bars import progress_text

        print(f"{'id':>6} {'status':<10} {'stage':<9} {'queue':<8} {'prio':>4} {'att':>3}  overrides / progress")
        for j in jobs:
            print(
                f"{j.id:>6} {j.status + ('*' if j.cancel_requested else ''):<10} {j.stage:<9} {j.queue:<8} "
                f"{j.priority:>4} {j.attempts:>3}  {' '.join(j.to_dict()['overrides'])[:80]}"
            )
            if j.status == "running" and (bar := progress_text(j.to_dict()["progress"], j.status)):
                print(f"{'':>6} {bar}")
        print(f"({len(jobs)} of {total} jobs)")
    return 0


# -- logs, cancel, retry ------------------------------------------------------------------------
def _cmd_logs(args: argparse.Namespace) -> int:
    from ptmlab import queue
    from ptmlab.db import TERMINAL_STATES

    with _session(args) as s:
        chunk = queue.read_log(s, args.job_id, attempt=args.attempt, tail=args.tail)
    sys.stdout.write(chunk.text)
    sys.stdout.flush()
    offset, attempt = chunk.offset, chunk.attempt
    while args.follow:
        time.sleep(0.5)
        with _session(args) as s:
            job = queue.get_job(s, args.job_id)
            latest = job.attempts or None
            if args.attempt is None and latest is not None and latest != attempt:
                attempt, offset = latest, 0  # a new attempt (requeued job): follow its log
                print(f"\n== attempt {attempt}", flush=True)
            chunk = queue.read_log(s, args.job_id, attempt=attempt, offset=offset)
        sys.stdout.write(chunk.text)
        sys.stdout.flush()
        offset = chunk.offset
        if job.status in TERMINAL_STATES and not chunk.text:
            break
    return 0


def _cmd_cancel(args: argparse.Namespace) -> int:
    from ptmlab import queue

    with _session(args) as s:
        for job_id in args.job_ids:
            job = queue.cancel_job(s, job_id)
            print(f"job {job.id}: {'cancel requested (running)' if job.cancel_requested else job.status}")
    return 0


def _cmd_retry(args: argparse.Namespace) -> int:
    from ptmlab import queue

    with _session(args) as s:
        for job_id in args.job_ids:
            job = queue.retry_job(s, job_id)
            print(f"job {job.id}: {job.status}")
    return 0


def _cmd_label(args: argparse.Namespace) -> int:
    from ptmlab import queue

    tags: dict[str, str | None] = {**tag_options(args.tag), **dict.fromkeys(args.untag or [])}
    changes = {k: getattr(args, k) for k in ("name", "note") if getattr(args, k) is not None}
    with _session(args) as s:
        job = queue.label_job(s, args.job_id, tags=tags, **changes)
        tag_text = ", ".join(f"{k}={v}" for k, v in sorted((job.tags or {}).items())) or "no tags"
        print(f"job {job.id}: name {job.name or '-'}; {tag_text}" + (f"; note: {job.note}" if job.note else ""))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    def db_option(p):
        p.add_argument("--database-url", default=None, help="default: PTMLAB_DATABASE_URL or SQLite in PTMLAB_HOME")

    p = sub.add_parser("worker", help="run jobs from the queue: ptmlab worker --gpus 0,1 --queues default")
    p.add_argument(
        "--gpus",
        default=None,
        help="GPU indices this worker hands out, e.g. 0,1, or `slurm`: those "
        "of the Slurm allocation it runs in (default: none)",
    )
    p.add_argument(
        "--multinode",
        action="store_true",
        help="run only jobs with nodes > 1, each through Slurm's srun across the hosts it allocates "
        "(start it where sbatch/srun work, e.g. a login node); --cpu-slots = jobs launched at once",
    )
    p.add_argument(
        "--srun-arg",
        action="append",
        default=None,
        metavar="ARG",
        help="extra srun option for multinode jobs, e.g. --srun-arg=--partition=gpu (repeatable)",
    )
    p.add_argument(
        "--cold-start",
        action="store_true",
        help="start every job as a fresh `python -m ptmlab.run` (default: CPU jobs are forked from a "
        "launcher that has torch, Lightning and the stages imported: seconds faster per job)",
    )
    p.add_argument("--queues", default="default", help="comma-separated queue names (default: default)")
    p.add_argument("--cpu-slots", type=int, default=None, help="CPU jobs (gpus=0) run at once (default: 1)")
    p.add_argument("--lease-s", type=float, default=30.0, help="a silent worker's jobs are requeued after this")
    p.add_argument("--poll-s", type=float, default=0.5, help="how often an idle worker looks for work")
    p.add_argument(
        "--grace-s", type=float, default=0.0, help="on SIGTERM, let running jobs go on this long before requeueing them"
    )
    p.add_argument("--burst", action="store_true", help="exit when nothing runs and nothing is claimable")
    p.add_argument("--max-jobs", type=int, default=None, help="exit after starting this many jobs")
    p.add_argument("--worker-id", default=None, help="default: <host>-<pid>-<random>")
    db_option(p)
    p.set_defaults(func=_cmd_worker)

    p = sub.add_parser("submit", help="queue a job: ptmlab submit stage=pretrain model=bert_tiny ...")
    p.add_argument("overrides", nargs="*", help="Hydra overrides (stage=..., seed=... included)")
    p.add_argument("--pipeline", default=None, help="queue conf/pipeline/<name>.yaml; overrides apply to every job")
    p.add_argument("--queue", default="default")
    p.add_argument("--priority", type=int, default=0, help="higher runs first")
    p.add_argument("--gpus", type=int, default=0, help="GPUs (per node when --nodes > 1)")
    p.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="> 1: one job across hosts, run by a `ptmlab worker --multinode` through Slurm's srun",
    )
    p.add_argument("--timeout-s", type=float, default=None)
    p.add_argument("--max-attempts", type=int, default=3)
    p.add_argument("--after", default=None, help="comma-separated job ids that must succeed first")
    p.add_argument("--name", default=None, help="a name for `job:<name>` references")
    p.add_argument("--tag", action="append", help="key=value, repeatable")
    p.add_argument("--idempotency-key", default=None)
    p.add_argument("--no-validate", action="store_true", help="skip composing the config before queueing")
    p.add_argument("--wait", action="store_true", help="wait for the job(s), printing progress")
    db_option(p)
    p.set_defaults(func=_cmd_submit)

    p = sub.add_parser("status", help="jobs (or one job with its attempts, or --workers)")
    p.add_argument("job_id", nargs="?", type=int)
    p.add_argument("--status", default=None, help="queued|running|succeeded|failed|cancelled")
    p.add_argument("--sweep", default=None)
    p.add_argument("--pipeline", default=None)
    p.add_argument("--limit", type=int, default=30)
    p.add_argument("--workers", action="store_true")
    p.add_argument("--json", action="store_true")
    db_option(p)
    p.set_defaults(func=_cmd_status)

    p = sub.add_parser("logs", help="a job's log (latest attempt): ptmlab logs 12 -f")
    p.add_argument("job_id", type=int)
    p.add_argument("-f", "--follow", action="store_true")
    p.add_argument("--attempt", type=int, default=None)
    p.add_argument("--tail", type=int, default=None, help="only the last N lines")
    db_option(p)
    p.set_defaults(func=_cmd_logs)

    for name, func, text in (
        ("cancel", _cmd_cancel, "cancel jobs (a running one is killed)"),
        ("retry", _cmd_retry, "queue failed/cancelled jobs again"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("job_ids", type=int, nargs="+")
        db_option(p)
        p.set_defaults(func=func)

    p = sub.add_parser(
        "label", help="rename a job, (un)tag it, write its note: ptmlab label 12 --name lr-small --tag idea=warmup"
    )
    p.add_argument("job_id", type=int)
    p.add_argument("--name", default=None)
    p.add_argument("--tag", action="append", help="key=value, repeatable")
    p.add_argument("--untag", action="append", help="a tag key to remove, repeatable")
    p.add_argument("--note", default=None, help="free text kept with the run ('' clears it)")
    db_option(p)
    p.set_defaults(func=_cmd_label)

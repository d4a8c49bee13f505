"""`ptmlab up`: the embedded platform (API + dashboard, one worker, the MLflow UI on 127.0.0.1) as
child processes, each in its own process group, supervised until one exits or Ctrl-C stops all."""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import time


def up_commands(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """The embedded platform's processes: API (+ dashboard), one worker, the MLflow UI."""
    from ptmlab.settings import get_settings
    from ptmlab.tracking import mlflow_ui_command

    settings = get_settings()
    me = [sys.executable, "-m", "ptmlab.cli"]
    procs = []
    if not args.no_api and importlib.util.find_spec("ptmlab.api") is None:
        print("note: ptmlab.api is not installed; starting without the API and dashboard", file=sys.stderr)
    elif not args.no_api:
        procs.append(("api", [*me, "serve", "--host", "127.0.0.1", "--port", str(args.port or settings.bind_port)]))
    worker = [*me, "worker", "--queues", args.queues, "--cpu-slots", str(args.cpu_slots)]
    if args.gpus:
        worker += ["--gpus", args.gpus]
    if args.cold_start:
        worker.append("--cold-start")
    procs.append(("worker", worker))
    mlflow_ui = mlflow_ui_command(settings)
    if not args.no_mlflow and mlflow_ui is not None:
        procs.append(("mlflow", mlflow_ui))
    return procs


def _cmd_up(args: argparse.Namespace) -> int:
    from ptmlab.db import migrate
    from ptmlab.settings import get_settings, redact

    settings = get_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.artifact_root.mkdir(parents=True, exist_ok=True)
    migrate(settings.resolved_database_url)  # once, before the processes start
    children: dict[str, subprocess.Popen] = {}
    where = {  # one line per service: what it is and where to find it
        "api": f"dashboard + API  http://127.0.0.1:{args.port or settings.bind_port}",
        "worker": f"worker           queues {args.queues}, {args.cpu_slots} CPU slot(s), GPUs {args.gpus or 'none'}",
        "mlflow": f"MLflow UI        http://127.0.0.1:{settings.mlflow_ui_port}",
    }
    commands = up_commands(args)
    env = dict(os.environ)
    if "mlflow" in dict(commands) and not settings.mlflow_ui_url:
        env["PTMLAB_MLFLOW_UI_URL"] = f"http://127.0.0.1:{settings.mlflow_ui_port}"  # the dashboard's MLflow buttons
    for name, argv in commands:
        children[name] = subprocess.Popen(argv, start_new_session=True, env=env)
        print(f"{where[name]}  (pid {children[name].pid})", flush=True)
    print(f"database         {redact(settings.resolved_database_url, settings)}", flush=True)
    print(f"MLflow store     {redact(settings.resolved_tracking_uri, settings)}", flush=True)
    print("Ctrl-C stops all.", flush=True)
    # SIGTERM (a service manager, `docker stop`) stops all too; SIGINT is set explicitly because a
    # shell that starts `up` in the background hands it over ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)
    code = 0
    try:
        while True:
            for name, proc in children.items():
                if proc.poll() is not None:
                    print(f"{name} exited with code {proc.returncode}; stopping the others", file=sys.stderr)
                    code = proc.returncode or 1
                    raise KeyboardInterrupt
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        _stop_groups(list(children.values()))
    return code


def _interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def _stop_groups(procs: list[subprocess.Popen], grace_s: float = 15.0) -> None:
    """SIGTERM each child's whole process group, SIGKILL what is left after `grace_s`.

    Each child leads its own session, and its own children stay in its group: `mlflow ui` runs
    uvicorn workers and huey consumers that outlive a SIGTERM to the `mlflow` process alone (and
    keep our stdout open), so the group, not the pid, is what gets signalled."""
    for proc in procs:
        _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    # The leader may have exited before its grandchildren did: sweep every group.
    for proc in procs:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", help="the embedded platform: API + dashboard, one worker, MLflow UI (127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="API port (default: PTMLAB_BIND_PORT)")
    p.add_argument("--gpus", default=None)
    p.add_argument("--cpu-slots", type=int, default=1)
    p.add_argument("--queues", default="default")
    p.add_argument(
        "--cold-start",
        action="store_true",
        help="the worker starts every job as a fresh process (ptmlab worker --cold-start: no launcher "
        "holding torch, Lightning and the stages in memory, ~10 CPU-s of imports at start)",
    )
    p.add_argument("--no-api", action="store_true")
    p.add_argument("--no-mlflow", action="store_true")
    p.set_defaults(func=_cmd_up)

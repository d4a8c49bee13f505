"""Warm job start: a worker keeps one launcher process that has imported the heavy modules (torch,
Lightning, transformers, MLflow, Hydra, the stages) and forks each job from it, so a job starts
working in well under a second instead of ~8 s of imports (`import lightning` alone is ~7 s here).

The forked job is what `python -m ptmlab.run <overrides>` would be, as far as the worker can tell:
its own session and process group (the worker kills it with killpg as before), the job's
environment, stdin from /dev/null, stdout and stderr appended to the attempt's log, and it dies
with the worker (PR_SET_PDEATHSIG, through the launcher, which dies with the worker too). Its exit
status reaches the worker through the launcher, with Popen's convention (negative: killed by that
signal). The launcher never touches a GPU: forking after CUDA initialisation is unsafe, and jobs
choose their devices through CUDA_VISIBLE_DEVICES, read at their own first CUDA call.

Protocol (JSON lines): the worker writes {"id", "overrides", "env", "log_path"} to the launcher's
stdin; the launcher answers {"ready": seconds} once, then {"id", "pid"} per job and {"exit": pid,
"code"} when one ends. EOF on its stdin (the worker is gone) ends the launcher, and with it, by
PDEATHSIG, every job it started.

    python -m ptmlab.worker.warm_start      (started by the worker; not a command for people)
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

# Imported once in the launcher; a module that fails to import is left to the job (which then
# fails on it with its own traceback, as a cold start would).
# The list is what a 1-step pre-training job imported after the first line (measured with a
# sys.modules diff): MLflow's SQL store alone is ~1.2 s, peft ~0.5 s.
PRELOAD = (
    "torch",
    "lightning",
    "transformers",
    "mlflow",
    "hydra",
    "omegaconf",
    "ptmlab.run",
    "ptmlab.tracking",
    "ptmlab.science",  # then its preload_stages(): the four stage modules
    "lightning.pytorch.loggers.mlflow",
    "mlflow.store.tracking.sqlalchemy_store",
    "mlflow.tracing",
    "torch.distributed.checkpoint",
    "torch.distributed.elastic.multiprocessing",
    "peft",
    "transformers.generation",
    "transformers.models.bert.modeling_bert",
    "datasets",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql",
    "alembic.autogenerate",
    "hydra._internal.core_plugins.basic_launcher",
)
log = logging.getLogger(__name__)
LAUNCH_TIMEOUT_S = 10.0  # a fork answers in milliseconds; past this the launcher is taken as broken


def _set_parent_death_signal() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


# -- the launcher process ------------------------------------------------------------------------
class _ChildExit(BaseException):
    """Raised in a forked job once it has run: unwinds the launcher's frames (none of which has a
    finally) so that the job's interpreter exits the normal way (threads joined, atexit run)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def _send(fd: int, message: dict[str, Any]) -> None:
    os.write(fd, (json.dumps(message) + "\n").encode())


def _exit_code(value: Any) -> int:
    """sys.exit's argument as the process's exit status (None: 0; text: printed, 1)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def _run_job(request: dict[str, Any], launcher_pid: int, private_fds: list[int]) -> int:
    """In the forked child: become the job, run ptmlab.run's main, return its exit status."""
    os.setsid()  # its own session and process group: the worker's killpg reaches it and its children
    _set_parent_death_signal()
    if os.getppid() != launcher_pid:  # the launcher died between the fork and the prctl
        os._exit(137)
    for fd in private_fds:
        os.close(fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    log = os.open(request["log_path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    os.environ.clear()
    os.environ.update(request["env"])
    from ptmlab.settings import get_settings

    get_settings.cache_clear()  # settings read from the launcher's environment must not pass for the job's
    import ptmlab.run as run

    sys.argv = [run.__file__, *request["overrides"]]
    try:
        run.main(list(request["overrides"]))
        return 0
    except SystemExit as exc:
        return _exit_code(exc.code)
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _serve(requests_fd: int, answers_fd: int) -> None:
    launcher_pid = os.getpid()
    running: set[int] = set()
    pending = b""
    while True:
        readable, _, _ = select.select([requests_fd], [], [], 0.05)
        if readable:
            chunk = os.read(requests_fd, 1 << 16)
            if not chunk:
                return  # the worker is gone: our jobs die with us (PDEATHSIG)
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    raise _ChildExit(_run_job(request, launcher_pid, [requests_fd, answers_fd]))
                running.add(pid)
                _send(answers_fd, {"id": request["id"], "pid": pid})
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            running.discard(pid)
            _send(answers_fd, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def launcher_main() -> None:
    started = time.monotonic()
    # The protocol keeps the pipes; stray prints of imported modules go to stderr (the worker's log).
    requests_fd, answers_fd = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:
            print(f"warm start: {name} not preloaded: {exc}", file=sys.stderr, flush=True)
    try:
        from ptmlab.science import preload_stages

        preload_stages()
    except Exception as exc:
        print(f"warm start: the stage modules not preloaded: {exc}", file=sys.stderr, flush=True)
    # Every object imported so far moves to the collector's permanent generation: a forked job's
    # collections no longer touch (and so copy, page by page) the launcher's heap. Measured at
    # load 11-14: a forked 0.05 s sleep job 4.6-5.8 CPU-s without it, 1.0-1.4 with it (cold: 1.3).
    gc.freeze()
    _send(answers_fd, {"ready": round(time.monotonic() - started, 2)})
    try:
        _serve(requests_fd, answers_fd)
    except _ChildExit as done:
        sys.exit(done.code)


# -- the worker's side ---------------------------------------------------------------------------
class WarmProcess:
    """The part of subprocess.Popen the worker uses, for a job forked by the launcher."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._done = threading.Event()

    def _finished(self, code: int) -> None:
        self.returncode = code
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("warm job", timeout)
        return self.returncode  # type: ignore[return-value]  # set before _done is


class WarmLauncher:
    """Starts the launcher (in the background: jobs claimed before it is ready start cold) and
    forks jobs from it; `launch` returns None whenever it cannot, and the caller starts the job
    cold."""

    def __init__(self, python: str = sys.executable, env: dict[str, str] | None = None):
        self.ready_in: float | None = None
        self.broken: str | None = None
        self._lock = threading.Lock()
        self._next_id = 0
        self._answers: dict[int, WarmProcess] = {}  # request id -> its job
        self._answered = threading.Condition(self._lock)
        self._jobs: dict[int, WarmProcess] = {}
        self.proc = subprocess.Popen(
            [python, "-u", "-m", "ptmlab.worker.warm_start"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env=env,
            preexec_fn=_set_parent_death_signal if sys.platform == "linux" else None,
        )
        self._reader = threading.Thread(target=self._read, name="warm-launcher", daemon=True)
        self._reader.start()

    @property
    def ready(self) -> bool:
        return self.ready_in is not None and self.broken is None and self.proc.poll() is None

    def why_not(self) -> str:
        if self.broken:
            return self.broken
        if self.proc.poll() is not None:
            return f"the launcher exited ({self.proc.returncode})"
        return "the launcher is still importing"

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]  # opened with PIPE, never None
            message = json.loads(line)
            with self._lock:
                if "ready" in message:
                    self.ready_in = float(message["ready"])
                    log.info("warm launcher ready after %.1f s of imports (pid %d)", self.ready_in, self.proc.pid)
                elif "pid" in message:
                    job = WarmProcess(message["pid"])
                    self._jobs[job.pid] = job
                    self._answers[message["id"]] = job
                    self._answered.notify_all()
                elif "exit" in message and message["exit"] in self._jobs:
                    self._jobs.pop(message["exit"])._finished(int(message["code"]))
        # EOF: the launcher is gone, and PDEATHSIG took every job it had started.
        with self._lock:
            self.broken = self.broken or "the launcher exited"
            for job in self._jobs.values():
                job._finished(-signal.SIGKILL)
            self._jobs.clear()
            self._answered.notify_all()

    def launch(self, overrides: list[str], env: dict[str, str], log_path: str | Path) -> WarmProcess | None:
        if not self.ready:
            return None
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            try:
                self.proc.stdin.write(
                    (
                        json.dumps(
                            {
                                "id": request_id,
                                "overrides": list(overrides),
                                "env": dict(env),  # type: ignore[union-attr]  # the write on the pipe this call sits in
                                "log_path": str(log_path),
                            }
                        )
                        + "\n"
                    ).encode()
                )
                self.proc.stdin.flush()  # type: ignore[union-attr]  # opened with PIPE, never None
            except OSError as exc:
                self.broken = f"the launcher's pipe broke: {exc}"
                return None
            deadline = time.monotonic() + LAUNCH_TIMEOUT_S
            while request_id not in self._answers and self.broken is None:
                if not self._answered.wait(max(0.0, deadline - time.monotonic())) and time.monotonic() >= deadline:
                    break
            job = self._answers.pop(request_id, None)
            if job is None:
                # It may have forked the job without answering: stop it all rather than run a job twice.
                self.broken = self.broken or f"no answer within {LAUNCH_TIMEOUT_S:g} s"
                self.proc.kill()
            return job

    def close(self) -> None:
        """End the launcher (and, by PDEATHSIG, any job it still runs): EOF when it is serving, a
        kill while it is still importing (it would read the EOF only once its imports are done)."""
        if self.ready_in is None:
            self.proc.kill()
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]  # opened with PIPE, never None
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


if __name__ == "__main__":
    launcher_main()

"""The worker agent: claim → subprocess → heartbeat → record the outcome.

One process, one loop, no threads. Each job runs as `python -m ptmlab.run <overrides>` (an
argument list, never a shell) in its own session/process group, so cancel, timeout and shutdown
kill the job and everything it started (dataloader workers, ...) and nothing else. The child
dies with the worker (PR_SET_PDEATHSIG on Linux): a worker killed with -9 leaves no orphan to
run on beside the job's next attempt.

Signals: the first SIGTERM/SIGINT/SIGUSR1 stops claiming; running jobs get `--grace-s` seconds to
finish, then they are killed and handed back to the queue (rerun with `resume=true`, continuing
from their last checkpoint). A second signal ends the grace period at once. SIGUSR1 is Slurm's
warning before an allocation's time limit (ptmlab.slurm); `scancel` signals the worker and its
jobs together, so a job killed by a SIGTERM the worker did not send while it drains is handed
back too, not failed.

A `multinode` worker runs only jobs with nodes > 1, each through `srun` across the hosts Slurm
allocates (ptmlab.slurm.srun_prefix); Lightning takes ranks and the master address from srun.

The loop is here; starting a job's process is job_process.py, killing it supervision.py, storing
how its attempt ended outcome.py.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from ptmlab.code_keys import code_selecting_override
from ptmlab.db import FAILED, Study, get_sessionmaker
from ptmlab.disk import DISK_FULL_ERRNOS, describe_disk_full, free_bytes, is_nearly_full
from ptmlab.queue import (
    ClaimedJob,
    claim_next_job,
    finish_attempt,
    heartbeat,
    reap_expired_leases,
    register_worker,
    stop_worker,
    store_final_progress,
)
from ptmlab.recipes import SWEPT_KEYS_ENV
from ptmlab.slurm import current_allocation
from ptmlab.worker.job_process import across_nodes, job_argv, job_environment, open_job_log, start_cold, warm_start
from ptmlab.worker.outcome import append_line, describe_exit, store_outcome
from ptmlab.worker.supervision import RunningJob, escalate_kills, kill_job, killpg, timed_out
from ptmlab.worker.warm_start import WarmLauncher

log = logging.getLogger("ptmlab.worker")


@dataclass
class WorkerOptions:
    gpus: list[int] = field(default_factory=list)
    queues: list[str] = field(default_factory=lambda: ["default"])
    cpu_slots: int = 1
    lease_s: float = 30.0  # a job whose worker is silent this long is requeued
    poll_s: float = 0.5  # how often an idle worker looks for work
    grace_s: float = 0.0  # on SIGTERM: how long running jobs may go on before being requeued
    kill_grace_s: float = 2.0  # SIGTERM -> SIGKILL delay when killing a job's process group
    burst: bool = False  # exit once nothing is running and nothing is claimable
    max_jobs: int | None = None  # exit after starting this many jobs
    database_url: str | None = None
    home: Path | None = None
    worker_id: str | None = None
    python: str = sys.executable
    multinode: bool = False  # launch nodes > 1 jobs through srun, and nothing else
    srun_args: list[str] = field(default_factory=list)  # appended to the srun command (partition, account)
    warm_start: bool = True  # fork CPU jobs from a launcher with the heavy modules imported (worker/warm_start.py)

    @property
    def heartbeat_s(self) -> float:
        # Often enough that a cancel lands within seconds whatever the lease.
        return max(0.2, min(self.lease_s / 3, 1.0))


class WorkerAgent:
    def __init__(self, options: WorkerOptions):
        from ptmlab.settings import get_settings

        self.options = options
        settings = get_settings()
        self.home = Path(options.home or settings.home)
        self.jobs_root = self.home / "jobs"
        self.database_url = options.database_url or settings.resolved_database_url
        self.worker_id = options.worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
        self.Session = get_sessionmaker(self.database_url)
        self.running: dict[int, RunningJob] = {}
        self.launcher: WarmLauncher | None = None  # started by run()
        self.free_gpus = list(options.gpus)
        self.free_cpu_slots = options.cpu_slots
        self.draining = False
        self.drain_deadline: float | None = None
        self.signals = 0
        self.started_jobs = 0
        # Outcomes of exited jobs the database has not taken yet (it was restarting, ...), oldest
        # first: each is a call that records one; their jobs' leases are renewed meanwhile.
        self.unrecorded: list[tuple[ClaimedJob, Callable[[], object]]] = []
        self.db_error_at: float | None = None  # when a database step last failed (or stalled: _reap)
        self.disk_full_logged = False
        self.fault_point = settings.fault_point  # testing only (ptmlab.settings): None in real use

    # -- signals --------------------------------------------------------------------------
    def _on_signal(self, signum, _frame) -> None:
        now = time.monotonic()
        self.signals += 1
        if not self.draining:
            self.draining = True
            self.drain_deadline = now + self.options.grace_s
            log.info("%s: stopping: no new jobs; %d running", signal.Signals(signum).name, len(self.running))
        else:
            self.drain_deadline = now  # second signal: requeue now

    # -- main loop --------------------------------------------------------------------------
    def run(self) -> int:
        self.home.mkdir(parents=True, exist_ok=True)
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
        allocation = current_allocation()
        with self.Session() as s:
            register_worker(
                s,
                worker_id=self.worker_id,
                gpus=self.options.gpus,
                cpu_slots=self.options.cpu_slots,
                queues=self.options.queues,
                multinode=self.options.multinode,
                slurm_job_id=allocation.job_id if allocation else None,
                slurm_node=allocation.node if allocation else None,
                ends_at=allocation.ends_at if allocation else None,
            )
        log.info(
            "worker %s: gpus=%s cpu_slots=%d queues=%s%s%s db=%s",
            self.worker_id,
            self.options.gpus or "none",
            self.options.cpu_slots,
            ",".join(self.options.queues),
            " multinode" if self.options.multinode else "",
            f" slurm job {allocation.job_id} on {allocation.node}" if allocation else "",
            sa.make_url(self.database_url).render_as_string(hide_password=True),
        )
        next_heartbeat = 0.0
        if self.options.warm_start and not self.options.multinode:
            # Imports in the background: jobs claimed meanwhile start cold.
            self.launcher = WarmLauncher(self.options.python, env=job_environment(self.home))
        try:
            while True:
                now = time.monotonic()
                self._collect_exited()
                for rj in timed_out(self.running.values(), now):
                    self._kill(rj, "timeout")
                escalate_kills(self.running.values(), now)
                if now >= next_heartbeat:
                    self._guarded(self._heartbeat_and_reap)
                    next_heartbeat = now + self.options.heartbeat_s
                if self.draining:
                    if not self.running and (not self.unrecorded or self.signals > 1):
                        break
                    if self.drain_deadline is not None and now >= self.drain_deadline:
                        for rj in self.running.values():
                            self._kill(rj, "requeue")
                else:
                    claimed_any = self._guarded(self._claim_while_free) or False
                    if self.options.max_jobs is not None and self.started_jobs >= self.options.max_jobs:
                        self.draining, self.drain_deadline = True, None  # finish what runs, then exit
                    if self.options.burst and not self.running and not self.unrecorded and not claimed_any:
                        break
                    if claimed_any:
                        continue  # there may be more work: look again right away
                time.sleep(self.options.poll_s if not self.running else min(self.options.poll_s, 0.1))
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            for rj in list(self.running.values()):  # only on an unexpected error: never leave orphans
                self._kill(rj, "requeue", hard=True)
            self._collect_exited(wait=True)
            if self.launcher is not None:
                self.launcher.close()
            if self.unrecorded:
                log.warning(
                    "outcomes of jobs %s not recorded (database unreachable); their leases will expire and "
                    "they will be requeued",
                    [claim.job_id for claim, _ in self.unrecorded],
                )
            self._guarded(lambda: self._with_session(stop_worker, self.worker_id))
        log.info("worker %s stopped", self.worker_id)
        return 0

    def _with_session(self, fn, *args, **kwargs):
        with self.Session() as s:
            return fn(s, *args, **kwargs)

    def _guarded(self, fn, failed=None):
        """Run a database step; a transient database error (a restart, a lost connection) is
        logged and retried at the next loop instead of killing the worker and its jobs. Returns
        `failed` then."""
        try:
            return fn()
        except (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.DBAPIError) as exc:
            self.db_error_at = time.monotonic()
            log.warning("database error (will retry): %s", " ".join(str(exc).split())[:300])
            time.sleep(min(2.0, self.options.poll_s * 2))
            return failed

    def _record_later(self, claim: ClaimedJob, record: Callable[[], object]) -> None:
        self.unrecorded.append((claim, record))
        self._record_outcomes()

    def _record_outcomes(self) -> None:
        """Store the outcomes of exited jobs, oldest first. One the database does not take now
        stays queued and is tried again at the next loop: its job is never left running, nor
        reaped and run a second time."""
        while self.unrecorded:
            _, record = self.unrecorded[0]
            if self._guarded(lambda record=record: record() or True, failed=False) is False:
                return
            self.unrecorded.pop(0)

    def _fail_unstarted(self, claim: ClaimedJob, error: str) -> None:
        self._record_later(
            claim,
            lambda: self._with_session(
                finish_attempt,
                job_id=claim.job_id,
                attempt_id=claim.attempt_id,
                worker_id=self.worker_id,
                outcome=FAILED,
                error=error,
            ),
        )

    # -- claim & start ----------------------------------------------------------------------
    def _claim_while_free(self) -> bool:
        if is_nearly_full(self.home):
            # A job could not even write its log: leave the queue to workers with space.
            if not self.disk_full_logged:
                log.warning("not claiming jobs: %s has %s bytes free", self.home, free_bytes(self.home))
                self.disk_full_logged = True
            return False
        self.disk_full_logged = False
        claimed_any = False
        while not self.draining and (self.free_gpus or self.free_cpu_slots > 0):
            if self.options.max_jobs is not None and self.started_jobs >= self.options.max_jobs:
                break
            with self.Session() as s:
                claim = claim_next_job(
                    s,
                    worker_id=self.worker_id,
                    queues=self.options.queues,
                    free_gpus=list(self.free_gpus),
                    free_cpu_slots=self.free_cpu_slots,
                    lease_s=self.options.lease_s,
                    jobs_root=self.jobs_root,
                    multinode=self.options.multinode,
                )
            if claim is None:
                break
            claimed_any = True
            self._start(claim)
        return claimed_any

    def _start(self, claim: ClaimedJob) -> None:
        refused = code_selecting_override(claim.overrides) or self._refused_remote(claim)
        if refused is not None:
            # A row can reach the queue without the API (a script, an old client): the worker
            # never launches a job whose overrides pick the code it would import.
            self._fail_unstarted(claim, f"refused before start: {refused}")
            return
        if claim.gpus and claim.nodes <= 1:
            for g in claim.gpu_ids:
                self.free_gpus.remove(g)
        else:
            self.free_cpu_slots -= 1
        self.started_jobs += 1
        argv = job_argv(self.options.python, claim)
        env = {
            **job_environment(self.home),
            "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in claim.gpu_ids),
            "PTMLAB_JOB_ID": str(claim.job_id),
            SWEPT_KEYS_ENV: ",".join(claim.varied_keys),
        }
        if claim.nodes > 1:
            argv, env = across_nodes(claim, argv, env, self.options.srun_args)
        try:
            out = open_job_log(claim, argv, self.worker_id)
        except OSError as exc:
            # A full disk (or a folder that cannot be written) fails this job, not the worker.
            self._release(claim)
            if exc.errno in DISK_FULL_ERRNOS:
                exc.filename = exc.filename or str(Path(claim.log_path))
                detail = describe_disk_full(self.home, exc)
            else:
                detail = str(exc)
            self._fail_unstarted(claim, f"could not write the job's folder: {detail}")
            return
        with out:
            proc = warm_start(self.launcher, claim, env, out)
            try:
                proc = proc or start_cold(argv, env, out)
            except OSError as exc:
                self._release(claim)
                self._fail_unstarted(claim, f"could not start {argv[0]}: {exc}")
                return
        self.running[claim.job_id] = RunningJob(claim=claim, proc=proc, started=time.monotonic())
        log.info(
            "job %d attempt %d started (pid %d, gpus=%s)%s",
            claim.job_id,
            claim.attempt_number,
            proc.pid,
            claim.gpu_ids or "-",
            " resuming" if claim.resume else "",
        )

    def _release(self, claim: ClaimedJob) -> None:
        if claim.nodes > 1:
            self.free_cpu_slots += 1
            return
        if claim.gpus:
            self.free_gpus.extend(claim.gpu_ids)
            self.free_gpus.sort()
        else:
            self.free_cpu_slots += 1

    # -- supervise --------------------------------------------------------------------------
    def _heartbeat_and_reap(self) -> None:
        # Exited jobs whose outcome is not stored yet keep their leases too.
        job_ids = [*self.running, *(claim.job_id for claim, _ in self.unrecorded)]
        started = time.monotonic()
        with self.Session() as s:
            progress = {job_id: p for job_id, rj in self.running.items() if (p := rj.changed_progress())}
            reply = heartbeat(
                s,
                worker_id=self.worker_id,
                job_ids=job_ids,
                lease_s=self.options.lease_s,
                status="draining" if self.draining else None,
                progress=progress,
            )
            for job_id in reply.cancel:
                if job_id in self.running:
                    self._kill(self.running[job_id], "cancel")
            for job_id in reply.lost:
                if job_id in self.running:
                    self._kill(self.running[job_id], "lost")
            reaped = self._reap(s, job_ids, started)
        if reaped:
            log.info("reaped expired leases of jobs %s", reaped)
        self._advance_studies()

    def _refused_remote(self, claim: ClaimedJob) -> str | None:
        """What the API would refuse now in a job it queued: the files its paths name may have
        changed since (a symlink planted in PTMLAB_HOME), and `job:` references resolved to run
        folders are checked too. Jobs queued locally name the researcher's own files."""
        if not claim.submitted_remotely:
            return None
        from ptmlab.api.validation import allowed_roots, check_overrides_allowed
        from ptmlab.errors import ConfigError
        from ptmlab.settings import get_settings

        try:
            # The first root is the base relative paths resolve against: the home jobs run in.
            roots = allowed_roots(get_settings().model_copy(update={"home": self.home}))
            check_overrides_allowed(claim.overrides, roots)
        except ConfigError as exc:
            return str(exc)
        return None

    def _reap(self, s, job_ids: list[int], started: float) -> list[int]:
        """Reap the other workers' expired leases; never this worker's own jobs (`job_ids`), which
        its heartbeat renews however long the database kept it waiting."""
        s.execute(sa.select(1))  # opens the reaper's transaction: where SQLite makes it wait for a lock
        if time.monotonic() - started > self.options.lease_s / 2:
            # The database held this worker up for half a lease: the others were held up too, and
            # their leases may have run out waiting. As after an outage, give them a lease to renew.
            self.db_error_at = time.monotonic()
            log.warning(
                "database stalled %.1f s; not reaping leases for %.1f s",
                time.monotonic() - started,
                self.options.lease_s,
            )
        # After a database outage every lease looks expired: give the other workers one lease
        # to heartbeat again before taking their jobs away from them.
        if self.db_error_at is not None and time.monotonic() - self.db_error_at < self.options.lease_s:
            s.rollback()
            return []
        return reap_expired_leases(s, worker_id=self.worker_id, live_job_ids=job_ids)

    def _advance_studies(self) -> None:
        """Every worker drives the running studies (one at a time per study, by a short lease): new
        validations become intermediate values the pruner judges, ended trials are told, new ones
        asked. Workers do it, not the API, so a study goes on while the API restarts."""
        with self.Session() as s:
            if not s.scalar(sa.select(Study.id).where(Study.status == "running").limit(1)):
                return  # no study: Optuna is never imported by a worker that runs none
        from ptmlab.studies import advance_running_studies

        try:
            with self.Session() as s:
                stopped = advance_running_studies(s, url=self.database_url, driver_id=self.worker_id)
        except (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.DBAPIError):
            raise  # _guarded's retry
        except Exception:  # a study's fault must never take the worker and its jobs down
            log.exception("advancing the running studies failed; retried at the next heartbeat")
            return
        for job_id in stopped & set(self.running):  # pruned here: no need to wait for the next heartbeat
            self._kill(self.running[job_id], "cancel")

    def _kill(self, rj: RunningJob, reason: str, hard: bool = False) -> None:
        kill_job(rj, reason, self.options.kill_grace_s, hard=hard)

    def _pause_at_fault_point(self, job_id: int, code: int) -> None:
        """PTMLAB_FAULT_POINT=before-outcome: stop here for good, the job exited and its outcome
        not recorded, so a test can kill the worker in that window (tests/platform/test_kill_matrix.py)."""
        log.warning(
            "fault point before-outcome: job %d exited (%s), its outcome not recorded; pausing until killed",
            job_id,
            describe_exit(code),
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        while True:
            time.sleep(3600)

    def _collect_exited(self, wait: bool = False) -> None:
        for job_id, rj in list(self.running.items()):
            code = rj.proc.wait() if wait else rj.proc.poll()
            if code is None:
                continue
            killpg(rj.proc.pid, signal.SIGKILL)  # whatever the job left behind in its group
            if self.fault_point == "before-outcome":
                self._pause_at_fault_point(job_id, code)
            if self.signals and rj.kill_reason is None and code != 0:
                # Not our kill: the signal that stops the worker reached its jobs too (scancel and a
                # pre-emption end the whole allocation). The job did not fail; it resumes elsewhere.
                rj.kill_reason = "requeue"
            del self.running[job_id]
            self._release(rj.claim)
            self.unrecorded.append((rj.claim, lambda rj=rj, code=code: self._record(rj, code)))
        self._record_outcomes()

    def _record(self, rj: RunningJob, code: int) -> None:
        claim, elapsed = rj.claim, time.monotonic() - rj.started
        ids = {"job_id": claim.job_id, "attempt_id": claim.attempt_id, "worker_id": self.worker_id}
        with self.Session() as s:
            last = rj.changed_progress()
            if last is not None:  # where it got to, also when it was killed
                store_final_progress(s, job_id=claim.job_id, worker_id=self.worker_id, progress=last)
            ending = store_outcome(s, rj, code, ids)
        if claim.study_id:  # the next trial is asked now, not at the next heartbeat
            self._guarded(self._advance_studies)
        # The log's last line says how the attempt ended (written once the database took it).
        append_line(claim.log_path, f"== {ending} after {elapsed:.1f} s (attempt {claim.attempt_number})")
        log.info("job %d attempt %d: %s after %.1f s", claim.job_id, claim.attempt_number, ending, elapsed)

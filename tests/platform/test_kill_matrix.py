"""A killed job always recovers: real stages on tiny models through real `ptmlab worker`
processes, the worker SIGKILLed (its job dies with it, PR_SET_PDEATHSIG) at each moment of a run:

(a) before the MLflow run exists (the job has started and is importing torch),
(b) after the run exists (`mlflow_run_id.txt`) and before the first checkpoint,
(c) after a checkpoint, mid-training,
(d) during export,
(e) after `summary.json` is written and before the outcome is recorded.

The moments are observed on the real run folder, none injected, except (e): between a job's exit
and the worker recording it there is no file to watch, so that worker is started with
PTMLAB_FAULT_POINT=before-outcome (ptmlab.settings) and pauses there until killed.

What a "checkpoint" and an "export" are, per stage: pretrain and finetune, Lightning's
`checkpoints/last.ckpt` and `export/`; compress (a plain training loop that keeps no checkpoint),
a training step done (`progress.json`) and `export/task_model/`; probe, an activation shard in the
cache (what a killed extraction resumes from) and `probing/`.

Each job subprocess spends ~8 s of CPU importing torch, so one job per stage is killed once per
attempt, in the order (a) (b) (c) (d) (e), then runs to the end: (b) right after (a) re-opens
nothing and creates the run with resume=true, (c) re-opens a run whose params an attempt killed
before its first checkpoint logged (the bug of issue 21). A fine-tune that is never killed is the
source of the compress job, which starts as soon as it has ended; the probe job probes a fresh
BERT-tiny, so it waits for nothing. Every job then checks: `succeeded` once (every earlier attempt
`lost`), one result row, one MLflow run for the job, re-opened by each rerun after the first kill
that left one, FINISHED, no metric step holding two values, and the run folders of jobs that had
finished (the fine-tune read by compress included) are byte for byte as they were at the end.

Each chain has its own database, queue, worker and PTMLAB_HOME (MLflow store), and at most one
worker alive: a worker reaps every expired lease of its database, so with a shared database a
worker slowed by a loaded machine lost its just-claimed job to another chain's reaper. Alone, a
chain's next worker reaps only the job of the worker the test killed, so the lease can be short
(recovery waits for it) without any timing assumption. finetune, compress and probe run on
SQLite, pretrain (where issue 21 was seen) on PostgreSQL, all at once.
"""

from __future__ import annotations

import collections
import resource
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import sqlalchemy as sa
from test_faults import corpus, file_hashes, pretrain

from ptmlab import queue
from ptmlab.contracts.progress import read_progress
from ptmlab.db import LOST, RUNNING, SUCCEEDED, Attempt, Job, Result, dispose_engines, get_sessionmaker

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(600)]

POLL_S = 0.02  # how often a run folder is looked at while waiting for a moment to kill at (a stat)
STATE_S = 0.5  # how often the database and the worker are asked whether the attempt ended early
ATTEMPT_TIMEOUT_S = 240  # one attempt reaching its moment, on a loaded 2-core machine
# Only the chain's next worker, started after the kill, reaps: the lease is how long it waits.
LEASE_S = 1.0


def until(
    predicate: Callable[[], object],
    timeout: float,
    what: str,
    interval: float = 0.1,
    alive: Callable[[], str | None] = lambda: None,
) -> object:
    """Poll `predicate` until it is truthy; fail naming `what` after `timeout` s, or as soon as
    `alive()` (asked every STATE_S) says why waiting is pointless."""
    deadline = checked = time.monotonic()
    deadline += timeout
    while not (value := predicate()):
        now = time.monotonic()
        if now >= checked + STATE_S:
            checked = now
            if (why := alive()) is not None:
                pytest.fail(f"{what}: {why}")
        if now > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return value


# -- what a run folder shows ------------------------------------------------------------------
@dataclass(frozen=True)
class Markers:
    """Where a stage's checkpoint and export show, given (run folder, PTMLAB_HOME)."""

    checkpoint: Callable[[Path, Path], bool]
    export: Callable[[Path, Path], bool]


def lightning_checkpoint(run: Path, _home: Path) -> bool:
    return (run / "checkpoints" / "last.ckpt").exists()


def a_training_step(run: Path, _home: Path) -> bool:
    progress = read_progress(run) or {}
    return str(progress.get("phase", "")).startswith("compressing") and (progress.get("step") or 0) >= 1


def an_activation_shard(_run: Path, home: Path) -> bool:
    return any((home / "cache" / "activations").glob("*/shard_*.safetensors"))


MARKERS = {
    "pretrain": Markers(lightning_checkpoint, lambda run, _: (run / "export").exists()),
    "finetune": Markers(lightning_checkpoint, lambda run, _: (run / "export").exists()),
    "compress": Markers(a_training_step, lambda run, _: (run / "export" / "task_model").exists()),
    "probe": Markers(an_activation_shard, lambda run, _: (run / "probing").exists()),
}


def run_id_file(run: Path) -> bool:
    return (run / "mlflow_run_id.txt").exists()


def summary_file(run: Path) -> bool:
    return (run / "summary.json").exists()


def _text(path: str | None) -> str:
    try:
        return Path(path).read_text(errors="replace") if path else ""
    except OSError:
        return ""


# -- one job killed at successive moments -------------------------------------------------------
# A moment an attempt passes again after a kill: export runs again on every rerun; compress keeps
# no checkpoint, so its rerun trains from the start. A kill that lands too late for such a moment
# (the machine delayed the test's look at the run folder) is still a kill, and the next attempt
# aims at the same moment again; a moment that does not come back (a checkpoint exists now)
# fails the test.
RECURS = {"pretrain": "d", "finetune": "d", "compress": "bcd", "probe": "d"}
MAX_MISSES = 2


@dataclass
class Kill:
    moment: str
    at: float  # monotonic time of the kill
    landed: bool  # at its moment, else too late for it (and retried)
    next_start_s: float = 0.0  # kill -> the next attempt's start


@dataclass
class Chain:
    """One job on its own database, queue, worker and PTMLAB_HOME; the worker SIGKILLed at
    `moments`, one per attempt ("abcde": attempt 1 at (a), attempt 2 at (b), ...), then run to
    the end by a last worker."""

    name: str
    stage: str
    overrides: list[str]
    moments: str
    db_url: str
    home: Path
    job_id: int = 0
    kills: list[Kill] = field(default_factory=list)  # one per attempt but the last
    succeeded_at: float = 0.0
    finished_folder: dict[str, str] = field(default_factory=dict)  # file -> sha256, when the job succeeded

    @property
    def run_dir(self) -> Path:
        return self.home / "jobs" / str(self.job_id) / "run"

    def attempts(self) -> list[Attempt]:
        with get_sessionmaker(self.db_url)() as s:
            return queue.list_attempts(s, self.job_id)

    def status(self) -> str:
        with get_sessionmaker(self.db_url)() as s:
            return s.scalar(sa.select(Job.status).where(Job.id == self.job_id))

    def wait_for_attempt(self, number: int, alive: Callable[[], str | None]) -> Attempt:
        attempt = until(
            lambda: (a := self.attempts()) and len(a) == number and a[-1],
            ATTEMPT_TIMEOUT_S,
            f"{self.name}: attempt {number} to start",
            interval=0.2,
            alive=alive,
        )
        if self.kills:
            self.kills[-1].next_start_s = time.monotonic() - self.kills[-1].at
        return attempt


def run_chain(chain: Chain, spawn_worker) -> Chain:
    chain.home.mkdir(parents=True, exist_ok=True)
    with get_sessionmaker(chain.db_url)() as s:
        chain.job_id = queue.submit_job(
            s,
            stage=chain.stage,
            overrides=chain.overrides,
            queue=chain.name,
            max_attempts=len(chain.moments) + 1 + MAX_MISSES,
        ).id
    run, home, markers = chain.run_dir, chain.home, MARKERS[chain.stage]
    todo = list(chain.moments)
    while todo:
        moment, number = todo[0], len(chain.kills) + 1
        env = {"PTMLAB_FAULT_POINT": "before-outcome"} if moment == "e" else {}
        worker = spawn_worker(
            chain.db_url,
            chain.home,
            "--queues",
            chain.name,
            "--worker-id",
            f"{chain.name}-{number}",
            env=env,
            lease_s=LEASE_S,
        )
        worker_log = Path(worker.log_path)

        def alive(number=number, moment=moment, worker=worker, worker_log=worker_log) -> str | None:
            if worker.poll() is not None:
                return f"worker exited ({worker.returncode}):\n{worker_log.read_text()[-3000:]}"
            attempts = chain.attempts()
            if len(attempts) >= number and attempts[-1].status != RUNNING or chain.status() not in ("queued", RUNNING):
                return f"attempt {number} ended before moment ({moment}): {(attempts[-1].error or '')[-3000:]}"
            return None

        job_log = Path(chain.wait_for_attempt(number, alive).log_path)
        ready, held = {
            # The job's subprocess runs ptmlab.run, which then imports torch: far from a run.
            "a": (lambda job_log=job_log: "ptmlab.run: stage=" in _text(job_log), lambda: not run_id_file(run)),
            "b": (lambda: run_id_file(run), lambda: not markers.checkpoint(run, home)),
            "c": (lambda: markers.checkpoint(run, home), lambda: not markers.export(run, home)),
            "d": (lambda: markers.export(run, home), lambda: not summary_file(run)),
            "e": (
                lambda worker_log=worker_log: summary_file(run) and "fault point before-outcome" in _text(worker_log),
                lambda: summary_file(run) and chain.status() == RUNNING,
            ),
        }[moment]
        until(
            ready,
            ATTEMPT_TIMEOUT_S,
            f"{chain.name}: moment ({moment}) of attempt {number}",
            interval=POLL_S,
            alive=alive,
        )
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)  # the kernel has sent the job its SIGKILL (PDEATHSIG) by now
        kill = Kill(moment, time.monotonic(), landed=held())
        chain.kills.append(kill)
        if kill.landed:
            todo.pop(0)
            continue
        # The kill must have landed where the case says, else this case tested another one.
        misses = sum(not k.landed for k in chain.kills)
        assert moment in RECURS[chain.stage] and misses <= MAX_MISSES and chain.status() == RUNNING, (
            f"{chain.name}: the kill of attempt {number} missed moment ({moment}); run folder: "
            f"{sorted(p.name for p in run.iterdir())}; worker log:\n{_text(worker_log)[-3000:]}"
        )
    worker = spawn_worker(
        chain.db_url, chain.home, "--queues", chain.name, "--worker-id", f"{chain.name}-last", lease_s=LEASE_S
    )

    def alive() -> str | None:
        return None if worker.poll() is None else f"the last worker exited ({worker.returncode})"

    chain.wait_for_attempt(len(chain.kills) + 1, alive)
    until(
        lambda: chain.status() not in ("queued", RUNNING),
        ATTEMPT_TIMEOUT_S * 2,
        f"{chain.name}: the job to end",
        interval=0.2,
        alive=alive,
    )
    chain.succeeded_at = time.monotonic()
    assert chain.status() == SUCCEEDED, (chain.attempts()[-1].error or "")[-3000:]
    chain.finished_folder = file_hashes(run)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    return chain


# -- what must hold afterwards ------------------------------------------------------------------
def check_recovered(chain: Chain) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{chain.home / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, run_view_type=3)  # ALL: deleted runs count too
    # The chain's store holds its job's run only: never a second that looks final.
    assert [r.data.tags.get("ptmlab.job_id") for r in runs] == [str(chain.job_id)], (
        f"{chain.name}: MLflow runs {[(r.info.run_id, r.info.status, r.data.tags.get('ptmlab.job_id')) for r in runs]}"
    )
    attempts = chain.attempts()
    assert [a.status for a in attempts] == [LOST] * len(chain.kills) + [SUCCEEDED], [
        (a.status, a.error) for a in attempts
    ]
    with get_sessionmaker(chain.db_url)() as s:
        results = s.scalars(sa.select(Result).where(Result.job_id == chain.job_id)).all()
        job_run_id = s.scalar(sa.select(Job.mlflow_run_id).where(Job.id == chain.job_id))
    assert len(results) == 1, f"{chain.name}: {len(results)} result rows"
    (run,) = runs
    assert run.info.status == "FINISHED" and run.info.run_id == results[0].mlflow_run_id == job_run_id
    # Every attempt after the first kill that left a run re-opened it.
    opened_at = 2 if chain.moments.startswith("a") else 1
    assert int(run.data.tags.get("ptmlab.reopened", "0")) == len(chain.kills) + 1 - opened_at, run.data.tags
    # Params are the first attempt's that opened the run: resume=false unless a kill came before it.
    assert run.data.params["resume"] == ("True" if chain.moments.startswith("a") else "False")
    assert run.data.params["stage.name"] == chain.stage
    for key in run.data.metrics:
        values = collections.defaultdict(set)
        for m in client.get_metric_history(run.info.run_id, key):
            values[m.step].add(m.value)
        twice = {step: v for step, v in values.items() if len(v) > 1}
        assert not twice, f"{chain.name}: metric {key} logged twice with different values at {twice}"


def run_matrix(first: list[Chain], parent: str, then: Callable[[Chain], list[Chain]], spawn_worker) -> None:
    """Run the `first` chains at once and, as soon as chain `parent` has ended, the chains `then`
    makes (with a source or backbone that chain produced) beside them; then check every one."""
    started = time.monotonic()
    chains = {c.name: c for c in first}
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {c.name: pool.submit(run_chain, c, spawn_worker) for c in first}
        for c in then(futures[parent].result()):
            chains[c.name] = c
            futures[c.name] = pool.submit(run_chain, c, spawn_worker)
        for f in futures.values():
            f.result()
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"\nfault matrix: {time.monotonic() - started:.1f} s wall; CPU {me.ru_utime + me.ru_stime:.0f} s in "
        f"the test, {children.ru_utime + children.ru_stime:.0f} s in workers and jobs"
    )
    for c in chains.values():
        attempts = c.attempts()
        where = c.db_url.split(":")[0].split("+")[0]
        if not c.kills:
            print(f"  {c.stage:8s} never killed {where:10s}: job {c.job_id} {c.status()} in {len(attempts)} attempt")
        for number, kill in enumerate(c.kills, start=1):
            print(
                f"  {c.stage:8s} ({kill.moment}) {'' if kill.landed else 'MISSED, retried '}{where:10s}: "
                f"attempt {number} {attempts[number - 1].status}, job {c.status()}; next attempt "
                f"{kill.next_start_s:5.1f} s, succeeded {c.succeeded_at - kill.at:5.1f} s after the kill"
            )
    for c in chains.values():
        check_recovered(c)
    # Folders of jobs that had finished (read by later jobs as sources and backbones) are untouched.
    for c in chains.values():
        assert file_hashes(c.run_dir) == c.finished_folder, f"{c.run_dir} changed after its job finished"


# -- the stages, tiny -------------------------------------------------------------------------
def pretrain_overrides(corpus_dir: Path) -> list[str]:
    # 64 steps, a checkpoint every 4: (c) lands mid-training with 60 steps (seconds) left to run;
    # a checkpoint never comes back for a retry, so that window must outlast the test's look.
    return pretrain(corpus_dir, steps=64, every=4)


TINY_TASK = ["task=demo/sentiment", "task.max_train_samples=64", "task.max_eval_samples=32"]


# 16 steps an epoch, a checkpoint every 4: (c) lands in the first epoch with seconds of training
# left (a checkpoint never comes back for a retry, so that window must outlast the test's look).
def finetune_overrides(epochs: int) -> list[str]:
    return [
        "model=bert_tiny",
        "backbone=random",
        *TINY_TASK,
        f"stage.epochs={epochs}",
        "stage.batch_size=4",
        "stage.eval_batch_size=32",
        "checkpoint_every_n_steps=4",
        "trainer.enable_progress_bar=false",
    ]


# compress keeps no checkpoint; its progress.json is written at most once a second, so its
# training (288 steps of 2 examples, no control) lasts long enough to be seen mid-way.
COMPRESS = [
    "compression=distill",
    "compression.student_layers=1",
    "compression.epochs=6",
    "compression.control=false",
    "task=demo/sentiment",
    "task.max_train_samples=96",
    "task.max_eval_samples=32",
    "stage.batch_size=2",
    "stage.measure.repeats=2",
    "stage.measure.warmup=1",
    "stage.measure.threads=[0]",
    "stage.measure.batch_sizes=[8]",
]


def probe_overrides(corpus_dir: Path) -> list[str]:
    # A fresh BERT-tiny (its tokenizer trained on the pretrain corpus): no job to wait for.
    # (c) lasts from the first activation shard to `probing/`, and a cached shard never comes
    # back for a retry: enough sentences and probe epochs keep that window seconds long.
    return [
        "model=bert_tiny",
        "backbone=random",
        "data=text_files",
        f"data.corpus.path={corpus_dir}",
        "tokenizer.vocab_size=90",
        "tokenizer.min_frequency=1",
        "probe=upos",
        "probe.tasks=[upos,attention]",
        "stage.random_init_baseline=false",
        "stage.token.control=false",
        "stage.token.scalar_mix=false",
        "probe.data.train=${paths.conf_dir}/../data/demo/ud/train.conllu",
        "probe.data.eval=${paths.conf_dir}/../data/demo/ud/dev.conllu",
        "probe.data.max_train_sentences=240",
        "probe.data.max_eval_sentences=16",
        "stage.shard_sentences=8",
        "stage.token.epochs=100",
        "stage.attention.max_sentences=8",
    ]


@pytest.fixture()
def quiet_env(monkeypatch):
    # Each chain's jobs track to their own home's SQLite store, whatever the caller's environment says.
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("PTMLAB_MLFLOW_TRACKING_URI", raising=False)
    yield
    dispose_engines()


def test_kill_9_at_every_moment_of_every_stage_recovers(tmp_path, spawn_worker, corpus, postgres_url, quiet_env):
    """pretrain on PostgreSQL; finetune, compress and probe on SQLite; all at once (compress as
    soon as its source is fine-tuned)."""

    def chain(stage: str, moments: str, overrides: list[str], url: str | None = None, name: str = "") -> Chain:
        name = name or f"{stage}-{moments}"
        home = tmp_path / name
        return Chain(name, stage, overrides, moments, url or f"sqlite:///{home / 'ptmlab.db'}", home)

    first = [
        # Never killed: the source of the compress job (one epoch is enough for that). First, as
        # the compress job waits for it.
        chain("finetune", "", finetune_overrides(epochs=1), name="source"),
        # pretrain, where issue 21 was seen, on PostgreSQL: the claim differs between the two
        # databases, the recovery of a stage does not (the suite's budget allows one matrix).
        chain("pretrain", "abcde", pretrain_overrides(corpus), postgres_url),
        chain("finetune", "abcde", finetune_overrides(epochs=6)),
        chain("probe", "abcde", probe_overrides(corpus)),
    ]

    def then(source: Chain) -> list[Chain]:
        return [chain("compress", "abcde", [*COMPRESS, f"source={source.run_dir}"])]

    for c in [*first, *then(first[0])]:  # migrated here, one at a time: Alembic's migration is not thread-safe
        c.home.mkdir(parents=True)
        get_sessionmaker(c.db_url)
    run_matrix(first, "source", then, spawn_worker)

"""The durable job queue. Every function takes an open SQLAlchemy `Session` (from
`ptmlab.db.session_scope()` or the API's dependency) and commits its own unit of work, so a
caller never holds a queue transaction open. State lives only in the database: any number of
API processes and workers on any number of hosts share it.

Submitting and managing (API, CLI, sweep launcher):
    submit_job(session, *, stage=None, overrides=(), queue="default", priority=0, gpus=0,
               seed=None, timeout_s=None, max_attempts=3, depends_on=(), idempotency_key=None,
               name=None, tags=None, sweep_id=None, pipeline_id=None) -> Job
        `stage=`/`seed=` found in `overrides` move to their columns. A value `job:<id|name>`
        (e.g. `backbone=job:12`) adds that job as a parent and is replaced at claim time by the
        parent's run folder. An idempotency key already used returns the existing job (a
        different spec under the same key -> ConflictError). Unknown parent -> NotFoundError.
    submit_sweep(session, jobs: list[dict], *, name=None, spec=None) -> (Sweep, list[Job])
        each dict = submit_job keyword arguments; one transaction (a 1,000-job sweep is fast).
    submit_pipeline(session, pipeline: str | Path | dict, *, overrides=(), ...) -> (Pipeline, list[Job])
        a conf/pipeline/<name>.yaml graph (format: ptmlab.queue.pipelines), in one transaction.
    expand_pipeline(spec_or_name, overrides=()) -> list[PipelineJob]    (pure, for validation/dry runs)
    cancel_job(session, job_id) -> Job      queued: cancelled now; running: cancel_requested,
                                            its worker kills the process group within seconds.
    label_job(session, job_id, *, name=, tags={k: v|None}, note=) -> Job   rename, (un)tag, note; any state
    retry_job(session, job_id) -> Job       failed/cancelled -> queued again (and the children
                                            it had failed); other states -> ConflictError.
    get_job(session, job_id) -> Job         NotFoundError when missing.
    list_jobs(session, *, status=None, queue=None, stage=None, sweep_id=None, pipeline_id=None,
              limit=50, offset=0) -> (list[Job], total)          newest first
    list_attempts(session, job_id) -> list[Attempt]
    list_workers(session) -> list[Worker]
    get_sweep / get_pipeline(session, id)
    list_groups(session, "sweep" | "pipeline", *, limit=50, offset=0) -> (list[dict], total)
        newest first, each with its jobs counted by state, its status and its best result
    read_log(session, job_id, *, attempt=None, offset=0, tail=None) -> LogChunk(text, offset, size, path)

Worker side (ptmlab.worker):
    register_worker(session, *, worker_id, gpus, cpu_slots, queues, multinode, slurm_job_id, slurm_node,
                    ends_at) -> Worker
    claim_next_job(session, *, worker_id, queues, free_gpus, free_cpu_slots, lease_s, jobs_root, multinode)
        -> ClaimedJob | None       atomic; highest priority, then oldest; parents all succeeded;
                                   nodes > 1 jobs only for (and only) a multinode worker
    heartbeat(session, *, worker_id, job_ids, lease_s, status, progress) -> HeartbeatReply(cancel, lost)
                                   progress: {job_id: progress.json} stored on the jobs
    store_final_progress(session, *, job_id, worker_id, progress)
    finish_attempt(session, *, job_id, attempt_id, worker_id, outcome, exit_code, error, summary)
    requeue_job(session, *, job_id, attempt_id, worker_id, reason)
    reap_expired_leases(session, *, worker_id, live_job_ids) -> list[int]   requeue (resume=true) or fail
                                   after max_attempts; by the database's clock (ptmlab.queue.lease),
                                   never the reaping worker's own live jobs
    stop_worker(session, worker_id)

Job states: queued -> running -> succeeded | failed | cancelled (ptmlab.db.models).
"""

from ptmlab.queue.claim import (
    ClaimedJob,
    HeartbeatReply,
    claim_next_job,
    finish_attempt,
    heartbeat,
    reap_expired_leases,
    register_worker,
    requeue_job,
    stop_worker,
    store_final_progress,
)
from ptmlab.queue.groups import list_groups
from ptmlab.queue.jobs import (
    LogChunk,
    cancel_job,
    get_job,
    get_pipeline,
    get_sweep,
    label_job,
    list_attempts,
    list_jobs,
    list_workers,
    read_log,
    retry_job,
    submit_job,
    submit_sweep,
)
from ptmlab.queue.pipelines import PipelineJob, expand_pipeline, load_pipeline, submit_pipeline

__all__ = [
    "ClaimedJob",
    "HeartbeatReply",
    "LogChunk",
    "PipelineJob",
    "cancel_job",
    "claim_next_job",
    "expand_pipeline",
    "finish_attempt",
    "get_job",
    "get_pipeline",
    "get_sweep",
    "heartbeat",
    "label_job",
    "list_attempts",
    "list_groups",
    "list_jobs",
    "list_workers",
    "load_pipeline",
    "read_log",
    "reap_expired_leases",
    "register_worker",
    "requeue_job",
    "retry_job",
    "stop_worker",
    "store_final_progress",
    "submit_job",
    "submit_pipeline",
    "submit_sweep",
]

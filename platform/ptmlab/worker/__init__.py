"""The worker agent: `ptmlab worker --gpus 0,1 --queues default` (see ptmlab.worker.agent)."""

from ptmlab.worker.agent import WorkerAgent, WorkerOptions

__all__ = ["WorkerAgent", "WorkerOptions"]

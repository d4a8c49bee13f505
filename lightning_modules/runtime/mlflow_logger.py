"""The MLflow logger of every stage, made to outlive a tracking server that goes away for a while
(a restart, a network cut): training never waits for MLflow, and nothing logged is dropped.

- Metrics are queued and sent in order by one background thread. While the server is
  unreachable they stay queued (a few numbers per step) and go out, batched, once it is back.
- Every other call (run creation, params, tags, artifacts, run status) retries while the server
  is unreachable.
- Both give up after `retry_s` seconds (PTMLAB_TRACKING_RETRY_S, default 15 min) with MLflow's
  own error, which names the server; the job then fails instead of finishing with holes in its
  metrics.
- The waiting is done here, in tries at most MAX_PAUSE_S apart, so a server that is back is
  noticed within seconds. MLflow's HTTP client retries inside each try as well; its default
  (7 retries, exponential backoff: ~4 minutes, the last waits 2 minutes) would hide a returned
  server for that long, so a job that does not set MLFLOW_HTTP_REQUEST_MAX_RETRIES /
  MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR itself gets 2 quick retries (SHORT_HTTP_RETRIES).
- `finalize()` waits until every queued metric is stored: a run that ends successfully has all
  of its metrics in MLflow.

- A re-opened run (the rerun of a killed job, StageRun) keeps what its earlier attempts logged:
  a (metric, step) already in the run is not logged again (`keep_logged_steps`), so no step holds
  two values; how many were left out is the run's `ptmlab.metric_steps_kept` tag.

Only errors that mean "unreachable" are retried (connection refused or reset, timeouts, 502/503/504,
MLflow's retries exhausted); a refused request (bad run id, invalid value) fails at once.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from lightning.pytorch.loggers import MLFlowLogger
from lightning.pytorch.loggers.logger import rank_zero_experiment
from lightning.pytorch.utilities import rank_zero_only

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_METRICS_PER_BATCH = 1000  # MLflow's log-batch limit
MAX_PAUSE_S = 10.0  # between our tries, so a returned server is noticed soon
FAILED_RUN_RETRY_S = 30.0  # the budget left to a run that failed or was stopped
SHORT_HTTP_RETRIES = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
_UNAVAILABLE_STATUS = re.compile(r"failed with error code 50[234]\b")


def is_unreachable(exc: BaseException | None) -> bool:
    """True when `exc` (or an exception it was raised from) says the tracking server could not be
    reached or was temporarily unavailable, as opposed to refusing the request."""
    import requests

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(
            exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout | requests.exceptions.RetryError
        ):
            return True
        if isinstance(exc, requests.exceptions.HTTPError):
            status = getattr(exc.response, "status_code", None)
            return status in (502, 503, 504)
        if getattr(exc, "error_code", None) == "TEMPORARILY_UNAVAILABLE":
            return True
        message = str(exc)
        if message.startswith("API request to") and (
            "failed with exception" in message
            or "failed with timeout exception" in message
            or _UNAVAILABLE_STATUS.search(message)
        ):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def retry_while_unreachable(call: Callable[[], T], retry_s: float, what: str) -> T:
    """`call()`, tried again while the tracking server is unreachable, for up to `retry_s` seconds
    from the first try; then the last error is raised."""
    started = time.monotonic()
    pause = 1.0
    while True:
        try:
            return call()
        except Exception as exc:
            waited = time.monotonic() - started
            if not is_unreachable(exc) or waited >= retry_s:
                raise
            log.warning(
                "MLflow unreachable (%s), retrying; %.0f of %.0f s spent: %s",
                what,
                waited,
                retry_s,
                " ".join(str(exc).split())[:300],
            )
            time.sleep(min(pause, max(0.0, retry_s - waited)))
            pause = min(pause * 2, MAX_PAUSE_S)


class RetryingClient:
    """An `MlflowClient` whose every method retries while the tracking server is unreachable."""

    def __init__(self, client: Any, retry_s: float):
        self._client = client
        self.retry_s = retry_s

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def call(*args, **kwargs):
            return retry_while_unreachable(lambda: attr(*args, **kwargs), self.retry_s, name)

        return call


class BufferedMLFlowLogger(MLFlowLogger):
    """Lightning's MLFlowLogger with queued metrics and retried calls (see the module docstring)."""

    def __init__(self, *args: Any, retry_s: float, **kwargs: Any):
        # Before any thread of ours exists; every call made through this logger is retried here.
        for name, value in SHORT_HTTP_RETRIES.items():
            os.environ.setdefault(name, value)
        super().__init__(*args, **kwargs)
        self.retry_s = float(retry_s)
        self._mlflow_client = RetryingClient(self._mlflow_client, self.retry_s)
        self._queued: queue.Queue[list] = queue.Queue()
        self._sender: threading.Thread | None = None
        self._send_error: BaseException | None = None
        self._logged_before: dict[str, set[int]] = {}  # metric -> steps earlier attempts logged
        self._kept_steps = 0  # (metric, step) pairs left as an earlier attempt logged them

    @property
    @rank_zero_experiment
    def experiment(self) -> Any:
        if not self._initialized and self._run_id is None and self._experiment_id is None:
            self._experiment_id = self._find_or_create_experiment()
        return super().experiment

    def _find_or_create_experiment(self) -> str:
        """The experiment's id by name, created when missing. Two jobs that start together on a store
        without it both find none and both create it (the first stage of each kind on a new store);
        the second's refusal (UNIQUE constraint failed on SQLite and PostgreSQL, "already exists"
        from a server) is not a failure: it reads the one the first created. Lightning's own
        look-up would let that refusal fail the job (an ASHA trial in CI, its job 8 s old)."""
        client = self._mlflow_client
        found = client.get_experiment_by_name(self._experiment_name)
        if found is not None and found.lifecycle_stage != "deleted":
            return found.experiment_id
        try:
            return client.create_experiment(name=self._experiment_name, artifact_location=self._artifact_location)
        except Exception as exc:
            if is_unreachable(exc):  # the retries' budget is spent: not a lost race
                raise
            found = client.get_experiment_by_name(self._experiment_name)
            if found is None or found.lifecycle_stage == "deleted":
                raise
            return found.experiment_id

    def keep_logged_steps(self) -> None:
        """Read which steps of which metrics the run already holds: those are not logged again.
        A rerun that resumes from a checkpoint repeats the steps between that checkpoint and the
        kill (and re-measures what was measured after training) with other values; MLflow cannot
        replace a logged value, and two values at one step would make any chart or "latest value"
        ambiguous."""
        client = self._mlflow_client
        for key in client.get_run(self.run_id).data.metrics:
            self._logged_before[key] = {m.step for m in client.get_metric_history(self.run_id, key)}

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        from mlflow.entities import Metric

        if self._send_error is not None:  # the server stayed away past retry_s: stop the job
            raise self._send_error
        timestamp_ms = int(time.time() * 1000)  # when measured, not when sent
        batch = []
        prefix = f"{self._prefix}{self.LOGGER_JOIN_CHAR}" if self._prefix else ""  # as MLFlowLogger's prefix
        for key, value in metrics.items():
            key = prefix + key
            if isinstance(value, str):
                continue
            key = re.sub("[^a-zA-Z0-9_/. -]+", "", key)  # MLflow's allowed characters, as MLFlowLogger
            if (step or 0) in self._logged_before.get(key, ()):
                self._kept_steps += 1
                continue
            batch.append(Metric(key=key, value=float(value), timestamp=timestamp_ms, step=step or 0))
        if not batch:
            return
        if self._sender is None:
            _ = self.run_id  # create the run here, in the training thread
            self._sender = threading.Thread(target=self._send_queued, name="mlflow-metrics", daemon=True)
            self._sender.start()
        self._queued.put(batch)

    def _send_queued(self) -> None:
        while True:
            batch = self._queued.get()
            taken = 1
            # After an outage, what piled up goes out in a few large requests.
            while len(batch) < MAX_METRICS_PER_BATCH:
                try:
                    more = self._queued.get_nowait()
                except queue.Empty:
                    break
                batch, taken = batch + more, taken + 1
            try:
                if self._send_error is None:
                    for i in range(0, len(batch), MAX_METRICS_PER_BATCH):
                        self._mlflow_client.log_batch(run_id=self._run_id, metrics=batch[i : i + MAX_METRICS_PER_BATCH])
            except BaseException as exc:
                self._send_error = exc
            finally:
                for _ in range(taken):
                    self._queued.task_done()

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every queued metric is stored (at most `timeout` s); raise if sending gave up."""
        if self._sender is not None:
            deadline = None if timeout is None else time.monotonic() + timeout
            with self._queued.all_tasks_done:
                while self._queued.unfinished_tasks:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise TimeoutError(
                            f"{self._queued.unfinished_tasks} metric batches not stored after {timeout:g} s"
                        )
                    self._queued.all_tasks_done.wait(left)
        if self._send_error is not None:
            raise self._send_error

    @rank_zero_only
    def finalize(self, status: str = "success") -> None:
        if self._kept_steps and self._run_id is not None:
            try:
                self._mlflow_client.set_tag(self._run_id, "ptmlab.metric_steps_kept", str(self._kept_steps))
            except Exception as exc:
                log.warning("could not tag the run with its kept metric steps: %s", exc)
        if status in ("success", "finished", "FINISHED"):
            self.flush()  # a run that ends well has every metric stored
        else:
            # A run that failed or was stopped does not wait the whole budget for its last words.
            self._mlflow_client.retry_s = min(self.retry_s, FAILED_RUN_RETRY_S)
            try:
                self.flush(timeout=FAILED_RUN_RETRY_S)
            except Exception as exc:
                log.warning("metrics of a failed run could not all be stored: %s", exc)
        super().finalize(status)

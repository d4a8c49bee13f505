"""`wait_until`: polling with a deadline, for tests that wait on servers, workers and jobs.

A plain module rather than conftest.py: a lane of `make test` collects tests/platform beside
tests/e2e, and `from conftest import ...` would then find whichever conftest was imported first."""

from __future__ import annotations

import time

import pytest


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1):
    """Poll `predicate` until it returns a truthy value; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)

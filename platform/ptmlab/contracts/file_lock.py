"""One process at a time through a section, across processes sharing a folder (torch-free, a shared
leaf: lightning_modules imports it too).

    with exclusive(folder / ".lock"):      # blocks until no other holder
        if not result.exists(): build(result)

An advisory `fcntl.flock` on a lock file that stays in place: the kernel releases it when the file
closes or the holder dies (a SIGKILLed job leaves no stale lock to clean up). Used where two jobs
started together would otherwise build the same cached thing twice: the MLflow SQLite store
(ptmlab.tracking), a trained tokenizer (lightning_modules/data/tokenizer.py), an activation cache
entry (lightning_modules/probing/activations.py).
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(lock_path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on `lock_path` (created, never removed) for the `with` block."""
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

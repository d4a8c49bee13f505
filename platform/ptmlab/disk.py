"""A full disk, told apart from other failures (torch-free: the worker and `ptmlab.run` use it).

A job that runs out of space usually cannot say so: its log lives on the same full disk, so the
traceback is cut off or missing. `ptmlab.run` therefore exits with EXIT_DISK_FULL when the error
it dies of is a full disk (ENOSPC, a quota: EDQUOT, a file size limit: EFBIG), and the worker
also looks at the free space of the job's folder when a job fails, and names the path.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

EXIT_DISK_FULL = 28  # = ENOSPC; `ptmlab.run`'s exit code when the job died of a full disk
DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# Below this a worker claims nothing: it could not even write a job's log.
MIN_FREE_BYTES = 1 << 20


def disk_full_error(exc: BaseException | None) -> OSError | None:
    """The OSError saying "no space" (or quota, or file size limit) in `exc`'s chain, if any."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def free_bytes(path: str | Path) -> int | None:
    """Free bytes on the filesystem holding `path` (or its nearest existing parent)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def is_nearly_full(path: str | Path, min_free: int = MIN_FREE_BYTES) -> bool:
    free = free_bytes(path)
    return free is not None and free < min_free


def describe_disk_full(path: str | Path, exc: OSError | None = None) -> str:
    """One line naming what could not be written (the file when known, else `path`) and the free
    space left on `path`'s filesystem."""
    what = exc.strerror if exc is not None and exc.strerror else "No space left on device"
    target = (exc.filename2 or exc.filename) if exc is not None else None  # a copy's target is filename2
    free = free_bytes(path)
    left = f" ({free} bytes free on the filesystem of {path})" if free is not None else ""
    return f"{what}: {target or path}{left}"

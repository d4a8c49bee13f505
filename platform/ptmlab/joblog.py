"""A job's log, readable: each line once, no advertisements, no dependency deprecation noise.

`ptmlab.run` calls `quiet_dependencies()` before a stage that trains (it imports Lightning, which
the stage would import anyway) and `log_job_header(cfg)` once the config is checked. Every filter
here names what it drops and why; drop nothing that tells the researcher something about their run.
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ptmlab.contracts.secrets import redact_from
from ptmlab.settings import redact, secret_literals

# Messages dropped from dependency loggers: (logger, text the message contains).
DROPPED_MESSAGES = (
    # An advertisement for Lightning's hosted logger, printed at every fit (added with
    # Lightning-AI/pytorch-lightning#21430); ptmlab logs to MLflow.
    ("lightning.pytorch.utilities.rank_zero", "💡 Tip"),
    # The first run of an experiment creates it: expected, not a warning.
    ("lightning.pytorch.loggers.mlflow", "not found. Creating it."),
)
# Python warnings raised inside dependencies, filtered by message at their source.
DROPPED_WARNINGS = (
    # Lightning's pytree helper on torch >= 2.10 (Lightning-AI/pytorch-lightning#21326): a
    # FutureWarning at every batch transfer, about Lightning's code, not the user's.
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),
    # A worker runs single-host jobs inside a Slurm allocation without srun on purpose
    # (ptmlab.slurm); multi-node jobs do run under srun.
    (UserWarning, r"The `srun` command is available on your system but is not used"),
)


class _DropMessages(logging.Filter):
    def __init__(self, needle: str):
        super().__init__()
        self.needle = needle

    def filter(self, record: logging.LogRecord) -> bool:
        return self.needle not in record.getMessage()


def quiet_dependencies() -> None:
    import os

    # Progress bars drawn into a log file are noise ("Writing model shards: 100%|████|"): the
    # job's progress is in progress.json. Read by huggingface_hub/transformers at import.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import lightning  # noqa: F401 - its import adds the console handler removed below

    # `lightning` adds its own console handler ("INFO: ...") and still propagates to the root
    # handler Hydra configured: every line would print twice. Hydra's handler (console + the run
    # folder's log file) stays.
    for handler in list(logging.getLogger("lightning").handlers):
        logging.getLogger("lightning").removeHandler(handler)
    for name, needle in DROPPED_MESSAGES:
        logging.getLogger(name).addFilter(_DropMessages(needle))
    # MLflow's "Creating initial MLflow database tables..." at every new store.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
    for category, pattern in DROPPED_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern, category=category)


def config_hash(cfg: DictConfig) -> str:
    """A short hash of the resolved config without Hydra's own node: the same experiment, the same hash."""
    text = OmegaConf.to_yaml(
        {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k != "hydra"}, sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def job_header(cfg: DictConfig, run_dir: str) -> str:
    return f"ptmlab.run: stage={cfg.stage.name} config {config_hash(cfg)} run folder {run_dir}"


def command_line(argv: list[str]) -> str:
    """The job's command as its log's header shows it: secrets in its overrides masked (the log is
    read by anyone who can read the job)."""
    return redact(" ".join(argv)) or ""


# A log is served a whole line at a time (a carriage return ends a progress bar's line) so that
# each line is redacted whole: a secret cut by a read, or by an offset chosen inside it, is never
# shown in part.
LINE_ENDS = (b"\n", b"\r")
# How far back a read looks for the start of the line an offset falls in: an offset deeper than
# this inside a line reads from the next line on.
MAX_LINE_BYTES = 1 << 20


def read_log_file(
    path: Path, *, offset: int = 0, tail: int | None = None, complete: bool = True
) -> tuple[str, int, int]:
    """(text, next offset, size) of a job's log, redacted: from byte `offset`, or its last `tail`
    lines. Offsets count bytes of the file. While the job runs (`complete` false) the line still
    being written is held back until it ends; an offset inside a line shows that line from there,
    its secrets found in the whole line (`***` where the offset cut one)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        if tail is not None:
            return _read_tail(f, size, int(tail), complete)
        offset = max(0, min(int(offset), size))
        start = _line_start(f, offset)
        if start is None:  # inside a line too long to redact whole: serve from the next one
            f.seek(offset)
            skipped = _after_line_end(f.read(size - offset))
            if skipped is None:
                return "", offset if not complete else size, size
            start = offset = offset + skipped
        f.seek(start)
        data = f.read(size - start)
    end = len(data) if complete else _last_line_end(data)
    if end <= offset - start:  # nothing whole after the offset yet
        return "", offset, size
    data = data[:end]
    head = len(data[: offset - start].decode("utf-8", "replace"))
    return redact_from(data.decode("utf-8", "replace"), head, secret_literals()), start + end, size


def _read_tail(f, size: int, tail: int, complete: bool) -> tuple[str, int, int]:
    # A bounded window from the end: logs of long trainings grow large.
    window = min(size, max(4096, tail * 400))
    start = size - window
    f.seek(start)
    data = f.read(window)
    if start > 0 and not _ends_a_line(f, start):  # the window's first line is cut: left out
        first = _after_line_end(data)
        cut = first if first is not None else len(data)
        data, start = data[cut:], start + cut
    end = len(data) if complete else _last_line_end(data)
    lines = data[:end].decode("utf-8", "replace").splitlines(keepends=True)
    text = "".join(lines[-tail:]) if tail > 0 else ""
    return redact(text) or "", start + end, size


def _line_start(f, offset: int) -> int | None:
    """Where the line holding byte `offset` starts; None past MAX_LINE_BYTES back."""
    if offset == 0:
        return 0
    back = min(offset, MAX_LINE_BYTES)
    f.seek(offset - back)
    before = f.read(back)
    last = max(before.rfind(end) for end in LINE_ENDS)
    if last >= 0:
        return offset - back + last + 1
    return 0 if back == offset else None


def _ends_a_line(f, position: int) -> bool:
    """Whether the byte before `position` ends a line."""
    f.seek(position - 1)
    return f.read(1) in LINE_ENDS


def _after_line_end(data: bytes) -> int | None:
    found = [i for i in (data.find(end) for end in LINE_ENDS) if i >= 0]
    return min(found) + 1 if found else None


def _last_line_end(data: bytes) -> int:
    return max(data.rfind(end) for end in LINE_ENDS) + 1

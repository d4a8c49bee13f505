"""A job's log, readable: each line once, no advertisements, no dependency deprecation noise.

`ptmlab.run` calls `quiet_dependencies()` before a stage that trains (it imports Lightning, which
the stage would import anyway) and `log_job_header(cfg)` once the config is checked. Every filter
here names what it drops and why; drop nothing that tells the researcher something about their run.
"""

from __future__ import annotations

import hashlib
import logging
import warnings

from omegaconf import DictConfig, OmegaConf

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
    text = OmegaConf.to_yaml({k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k != "hydra"},
                             sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def job_header(cfg: DictConfig, run_dir: str) -> str:
    return f"ptmlab.run: stage={cfg.stage.name} config {config_hash(cfg)} run folder {run_dir}"

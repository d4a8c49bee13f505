"""What every stage does around its own computation: seeding, the run folder, the MLflow
logger, provenance (resolved config, git SHA and dirty diff, package versions, data hashes),
checkpoints that resume after preemption, and `summary.json`.

A stage function looks like:

    def run_pretrain(cfg):
        with StageRun(cfg) as run:            # seeds, opens/resumes the MLflow run
            run.log_data_files(paths)         # sha256 of every input file
            trainer = run.build_trainer()     # Lightning Trainer wired to MLflow + checkpoints
            trainer.fit(module, datamodule=dm, ckpt_path=run.resume_checkpoint)
            run.write_summary(run.summary(PretrainSummary, steps=..., ...))   # headline numbers for the platform

Under a multi-process strategy (trainer=ddp) Lightning starts one copy of the command per extra
device; each runs the stage function. Only global rank 0 opens the MLflow run, logs provenance
and artifacts and writes summary.json; the other ranks train with no logger (`is_global_zero`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lightning_modules.artifacts.digests import sha256_file
from lightning_modules.runtime.mlflow_logger import BufferedMLFlowLogger, RetryingClient
from lightning_modules.runtime.progress import ProgressCallback, ProgressReporter
from lightning_modules.runtime.speed import (
    SpeedSwitches,
    check_trainer_and_optimizer,
    split_trainer_config,
    unscale_before_clipping,
)
from lightning_modules.runtime.throughput import ThroughputMonitor, device_name, peak_flops_per_device
from ptmlab.contracts.identity import config_params
from ptmlab.contracts.secrets import redact_url_passwords
from ptmlab.contracts.summaries import StageSummary, Summary, build_summary

RUN_ID_FILE = "mlflow_run_id.txt"
SUMMARY_FILE = "summary.json"
TRACKED_PACKAGES = (
    "torch",
    "lightning",
    "transformers",
    "tokenizers",
    "datasets",
    "hydra-core",
    "omegaconf",
    "mlflow",
    "torchmetrics",
    "scikit-learn",
    "numpy",
    "ptmlab",
)


def tracking_uri(cfg: DictConfig) -> str:
    """The MLflow tracking URI ptmlab.config.set_runtime_paths resolved into the config."""
    uri = OmegaConf.select(cfg, "tracking.uri", default=None)
    if not uri:
        raise RuntimeError(
            "tracking.uri is not set: compose with ptmlab.config.compose_config or run "
            "`python -m ptmlab.run`, which resolve it"
        )
    return str(uri)


def run_dir_of(cfg: DictConfig) -> Path:
    """The run's own folder (Hydra's output dir); the worker sets it per job so a requeued job
    finds its checkpoints again."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir)
    explicit = OmegaConf.select(cfg, "run_dir", default=None)
    if explicit:
        return Path(explicit)
    raise RuntimeError("run_dir_of() needs Hydra's runtime or cfg.run_dir")


def git_state(conf_dir: str | Path) -> tuple[str | None, str]:
    """(HEAD sha, `git diff HEAD` text) of the repository that holds conf/, or (None, "")."""
    repo = Path(conf_dir).parent
    try:
        sha = (
            subprocess.run(
                ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or None
        )
        diff = subprocess.run(
            ["git", "-C", str(repo), "diff", "HEAD"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None, ""
    return sha, diff


def package_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def global_rank() -> int:
    """This process's rank in a multi-process job, before any Trainer exists: from RANK (torchrun),
    else LOCAL_RANK/NODE_RANK (the copies Lightning's launcher starts), else SLURM_PROCID (one
    task per device under srun); 0 in a single-process run."""
    env = os.environ
    if env.get("RANK"):
        return int(env["RANK"])
    if env.get("LOCAL_RANK"):
        local, node = int(env["LOCAL_RANK"]), int(env.get("NODE_RANK") or 0)
        return local if node == 0 else node * int(env.get("LOCAL_WORLD_SIZE") or 1) + local
    return int(env.get("SLURM_PROCID") or 0)


class StageRun:
    """Context manager around one stage execution (see module docstring)."""

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg
        self.run_dir = run_dir_of(cfg)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint_dir = self.run_dir / "checkpoints"
        self.logger = None
        self.reopened = False  # True: this attempt continues the MLflow run of an earlier one
        self.started = time.time()
        self._data_hashes: dict[str, str] = {}
        self.is_global_zero = global_rank() == 0
        self.throughput = None  # the ThroughputMonitor of the last build_trainer()
        # progress.json for the worker (phase, step/total, metrics, ETA); stages name their other
        # phases with `run.progress.phase("evaluating")`.
        self.progress = ProgressReporter(self.run_dir, enabled=self.is_global_zero)

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> StageRun:
        import lightning.pytorch as pl

        pl.seed_everything(int(self.cfg.seed), workers=True, verbose=False)
        if self.is_global_zero:  # the other ranks of a DDP job log nothing
            self.logger = self._make_logger()
            self._log_provenance()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.logger is not None:
            status = "FINISHED" if exc_type is None else "FAILED"
            # KeyboardInterrupt/SIGTERM (preemption) leaves the run open to be resumed.
            if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
                status = "KILLED"
            self.logger.finalize(status="success" if status == "FINISHED" else "failed")
            if status != "FINISHED":
                try:
                    self.logger.experiment.set_terminated(self.logger.run_id, status)
                except Exception:
                    pass

    # -- MLflow ----------------------------------------------------------------------------
    @property
    def resume_checkpoint(self) -> str | None:
        last = self.checkpoint_dir / "last.ckpt"
        if bool(OmegaConf.select(self.cfg, "resume", default=False)) and last.exists():
            return str(last)
        return None

    def _make_logger(self):

        Path(str(self.cfg.paths.home)).mkdir(parents=True, exist_ok=True)
        run_id_path = self.run_dir / RUN_ID_FILE
        # YAML booleans become lowercase tags so `tags.demo = 'true'` filters match what was typed.
        tags = {
            str(k): (str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in (OmegaConf.select(self.cfg, "tags", default={}) or {}).items()
        }
        tags.update({"ptmlab.stage": str(self.cfg.stage.name), "ptmlab.run_dir": str(self.run_dir)})
        job_id = OmegaConf.select(self.cfg, "tracking.job_id", default=None)
        if job_id:
            tags["ptmlab.job_id"] = str(job_id)
        retry_s = float(OmegaConf.select(self.cfg, "tracking.retry_s", default=None) or 900.0)
        run_id = None
        if bool(OmegaConf.select(self.cfg, "resume", default=False)):
            # A rerun of a job continues its MLflow run, never makes a second one: the run id file,
            # else (killed between creating the run and writing the file) the run tagged with
            # this run folder.
            if run_id_path.exists():
                run_id = run_id_path.read_text().strip() or None
            if run_id is None:
                run_id = self._run_of_this_folder(retry_s)
        self.reopened = run_id is not None
        # Survives a tracking server that is away for a while: metrics are queued, calls retried.
        logger = BufferedMLFlowLogger(
            experiment_name=str(self.cfg.tracking.experiment),
            run_name=str(OmegaConf.select(self.cfg, "run_name", default=self.cfg.stage.name)),
            tracking_uri=tracking_uri(self.cfg),
            tags=tags,
            run_id=run_id,
            artifact_location=(
                Path(str(self.cfg.paths.artifact_root)).as_uri()
                if tracking_uri(self.cfg).startswith("sqlite")
                else None
            ),
            retry_s=retry_s,
        )
        _ = logger.experiment  # create the run now so its id is known (and resumable)
        if self.reopened:
            # The run may have ended FINISHED (killed after its summary) or stay RUNNING (SIGKILL):
            # it is running again until this attempt ends. Metric steps an earlier attempt logged
            # keep their value (see BufferedMLFlowLogger.keep_logged_steps).
            logger.experiment.update_run(logger.run_id, status="RUNNING")
            logger.keep_logged_steps()
            previous = logger.experiment.get_run(logger.run_id).data.tags.get("ptmlab.reopened", "0")
            logger.experiment.set_tag(logger.run_id, "ptmlab.reopened", str(int(previous) + 1))
        # Atomic: a kill never leaves a half-written id for the rerun to read.
        tmp = run_id_path.with_suffix(".txt.tmp")
        tmp.write_text(logger.run_id)
        tmp.replace(run_id_path)
        return logger

    def _run_of_this_folder(self, retry_s: float) -> str | None:
        """The id of the MLflow run an earlier attempt created for this run folder (tagged
        `ptmlab.run_dir` at creation), or None."""
        from mlflow.tracking import MlflowClient

        client = RetryingClient(MlflowClient(tracking_uri=tracking_uri(self.cfg)), retry_s)
        experiment = client.get_experiment_by_name(str(self.cfg.tracking.experiment))
        folder = str(self.run_dir)
        if experiment is None or "'" in folder:  # a quote cannot be written in MLflow's filter syntax
            return None
        runs = client.search_runs(
            [experiment.experiment_id],
            filter_string=f"tags.`ptmlab.run_dir` = '{folder}'",
            order_by=["attributes.start_time ASC"],
            max_results=1,
        )
        return runs[0].info.run_id if runs else None

    @property
    def run_id(self) -> str | None:
        return self.logger.run_id if self.logger is not None else None

    def _log_provenance(self) -> None:
        client, run_id = self.logger.experiment, self.logger.run_id
        resolved = OmegaConf.to_container(self.cfg, resolve=True)
        # A tracking or database URL in the config may carry a password: never stored or logged.
        (self.run_dir / "config.yaml").write_text(redact_url_passwords(OmegaConf.to_yaml(self.cfg, resolve=True)))
        client.log_artifact(run_id, str(self.run_dir / "config.yaml"))
        # Params are immutable in MLflow, so they are logged once per run, whatever the checkpoint
        # state: a re-opened run (a rerun of a killed job) gets only the keys an earlier attempt did
        # not log (it may have been killed mid-way); `resume` and any other key that differs keep
        # the first attempt's value (the ptmlab.reopened tag counts the reruns).
        params = {k: str(v)[:500] for k, v in config_params(resolved, run_keys=True).items()}
        if self.reopened:
            logged = client.get_run(run_id).data.params
            params = {k: v for k, v in params.items() if k not in logged}
        if params:
            self.logger.log_hyperparams(params)
        sha, diff = git_state(self.cfg.paths.conf_dir)
        client.set_tag(run_id, "mlflow.source.git.commit", sha or "unknown")
        client.set_tag(run_id, "ptmlab.git_dirty", str(bool(diff)))
        if diff:
            client.log_text(run_id, diff, "provenance/git_diff.patch")
        client.log_dict(run_id, package_versions(), "provenance/packages.json")

    def log_data_files(self, paths: list[Path]) -> dict[str, str]:
        """Hash every input file; logged as provenance/data_hashes.json and returned (rank 0)."""
        if self.logger is None:
            return {}
        for p in paths:
            self._data_hashes[str(p)] = sha256_file(Path(p))
        self.logger.experiment.log_dict(self.run_id, self._data_hashes, "provenance/data_hashes.json")
        return dict(self._data_hashes)

    # -- training --------------------------------------------------------------------------
    def build_trainer(self, callbacks: list | None = None, flops_per_token=None, distributed: bool = True, **overrides):
        """A Lightning Trainer from cfg.trainer, logging to MLflow and checkpointing to the
        run folder (`last.ckpt` is what `resume=true` continues from). ptmlab's speed switches of
        cfg.trainer (runtime/speed.py) become a callback; `flops_per_token(seq_len)` (the module's
        training FLOPs per non-padding token) turns on the throughput/MFU metrics
        (runtime/throughput.py, kept in `self.throughput`). `distributed=False`: a stage that
        cannot yet run as several processes refuses a multi-process trainer (ConfigError)."""
        import lightning.pytorch as pl
        from hydra.utils import instantiate
        from lightning.pytorch.callbacks import ModelCheckpoint

        checkpoint = ModelCheckpoint(
            dirpath=str(self.checkpoint_dir),
            filename="step{step}",
            save_last=True,
            save_top_k=1,
            monitor=None,
            every_n_train_steps=int(OmegaConf.select(self.cfg, "checkpoint_every_n_steps", default=0) or 0) or None,
            auto_insert_metric_name=False,
        )
        trainer_cfg, speed = split_trainer_config(OmegaConf.to_container(self.cfg.trainer, resolve=True))
        trainer_cfg.update(overrides)
        check_trainer_and_optimizer(trainer_cfg, OmegaConf.select(self.cfg, "optimizer"))
        peak = speed.pop("peak_flops", None)
        all_callbacks = [checkpoint, SpeedSwitches(**speed), ProgressCallback(self.progress), *(callbacks or [])]
        if flops_per_token is not None:
            device = device_name(str(trainer_cfg.get("accelerator", "auto")))
            self.throughput = ThroughputMonitor(
                flops_per_token, peak_flops_per_device(device, trainer_cfg.get("precision"), peak), device
            )
            all_callbacks.append(self.throughput)
        trainer: pl.Trainer = instantiate(
            trainer_cfg,
            logger=self.logger if self.logger is not None else False,
            callbacks=all_callbacks,
            default_root_dir=str(self.run_dir),
        )
        # Fused AdamW is the default (lightning_modules.optim), and Lightning's own mixed-precision
        # plugin refuses to clip a fused optimizer's gradients; this one unscales them first.
        unscale_before_clipping(trainer)
        if not distributed and trainer.world_size > 1:
            from ptmlab.contracts import ConfigError

            raise ConfigError(
                f"stage={self.cfg.stage.name} runs as one process for now (its metrics and "
                f"predictions are computed over whole splits on one device); trainer.strategy="
                f"{trainer_cfg.get('strategy', 'auto')} with {trainer.world_size} processes is refused: "
                f"use trainer.devices=1"
            )
        return trainer

    def log_artifacts(self, local_dir: Path, artifact_path: str) -> None:
        if self.logger is None:
            return
        self.logger.experiment.log_artifacts(self.run_id, str(local_dir), artifact_path)

    def log_artifact(self, local_file: Path, artifact_path: str) -> None:
        if self.logger is None:
            return
        self.logger.experiment.log_artifact(self.run_id, str(local_file), artifact_path)

    def common_fields(self) -> dict[str, Any]:
        """The fields every stage's summary holds (`StageSummary`'s)."""
        return {
            "stage": str(self.cfg.stage.name),
            "mlflow_run_id": self.run_id,
            "run_dir": self.run_dir,
            "seed": int(self.cfg.seed),
            "wall_time_s": round(time.time() - self.started, 3),
            "hparams": config_params(OmegaConf.to_container(self.cfg, resolve=True)),
        }

    def summary(self, model: type[Summary], /, **fields: Any) -> Summary:
        """The stage's contract model (ptmlab.contracts.summaries) of its `fields` and the common
        ones, constructed directly; a ConfigError naming the field that breaks the contract or
        that `model` does not declare, wherever the stage runs."""
        return build_summary(model, **self.common_fields(), **fields)

    def write_summary(self, summary: StageSummary) -> Path:
        """Write summary.json, the dump of the stage's contract model (`summary`: headline numbers
        the worker copies into the `results` table), and log it to MLflow. Written atomically: a
        killed job never leaves half a file. Only global rank 0 writes it (the other ranks of a DDP
        job return the path untouched). Only the fields the stage set: the file keeps its keys; the
        worker's row adds the unset ones as null."""
        path = self.run_dir / SUMMARY_FILE
        if not self.is_global_zero:
            return path
        data = summary.model_dump(mode="json", exclude_unset=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(path)
        self.logger.experiment.log_artifact(self.run_id, str(path))
        return path

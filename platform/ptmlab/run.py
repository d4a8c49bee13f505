"""The single Hydra entry point: `python -m ptmlab.run stage=pretrain model=bert_tiny ...`.

Composes conf/config.yaml with the overrides, checks it (one-line error, exit 2, before any work
starts), runs the stage's `stage.preflight` (its inputs read, torch-light) and calls the stage
function named by `stage.entry` with what the preflight returned. lightning_modules is imported
lazily, inside the stage, so `--help`, validation and the sweep launcher stay light.
"""

from __future__ import annotations

import os
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from ptmlab.code_keys import code_keys
from ptmlab.config import CONF_DIR, check_config, compose_config, set_runtime_paths
from ptmlab.disk import EXIT_DISK_FULL, describe_disk_full, disk_full_error
from ptmlab.errors import ConfigError, PtmlabError
from ptmlab.joblog import job_header, quiet_dependencies
from ptmlab.recipes import apply_recipe
from ptmlab.settings import get_settings

EXIT_USER_ERROR = 2


def _fail(exc: PtmlabError) -> None:
    print(f"error[{exc.code}]: {exc}", file=sys.stderr, flush=True)
    sys.exit(EXIT_USER_ERROR)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig):
    from hydra.utils import get_method

    try:
        check_config(apply_recipe(set_runtime_paths(cfg), _task_overrides()))
        registered = code_keys().registered.get("entry", frozenset())
        if cfg.stage.entry not in registered:
            # Config is the registry: a stage function is imported only when a conf/stage file names it.
            raise ConfigError(
                f"stage.entry={cfg.stage.entry!r} is not a stage of conf/stage/ "
                f"(registered: {', '.join(sorted(registered))})"
            )
        print(job_header(cfg, _run_folder(cfg)), flush=True)
        read_ahead = None
        if cfg.stage.get("preflight"):
            # as quiet_dependencies does for the stage: a reader that loads a Hugging Face dataset
            # draws no progress bars into the job's log
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            # The stage's inputs read before its entry imports the training stack (~10 s): bad data
            # fails in seconds, before the tracking store is opened (lightning_modules/tasks/read_ahead.py).
            # What it read is handed to the entry, which would otherwise read it again.
            if cfg.stage.preflight not in code_keys().registered.get("preflight", frozenset()):
                raise ConfigError(f"stage.preflight={cfg.stage.preflight!r} is not a preflight of conf/stage/")
            read_ahead = get_method(cfg.stage.preflight)(cfg)
        if cfg.stage.entry.startswith("lightning_modules."):
            quiet_dependencies()
            from ptmlab.tracking import ensure_tracking_store

            # Two jobs opening a fresh embedded store at once would both create it (MLflow does
            # not lock): created here, once, before the stage opens it.
            ensure_tracking_store(str(cfg.tracking.uri))
        stage_fn = get_method(cfg.stage.entry)
        result = stage_fn(cfg) if read_ahead is None else stage_fn(cfg, read_ahead)
        _leave_process_group()
        return result
    except PtmlabError as exc:
        _fail(exc)
    except Exception as exc:
        if (full := disk_full_error(exc)) is not None:
            _fail_disk_full(exc, full)
        # hydra.utils.instantiate wraps errors raised by constructors (a corpus path that does
        # not exist, ...): report the user's error, not the wrapper.
        cause = ptmlab_error_in_chain(exc)
        if cause is None:
            raise
        _fail(cause)


def _leave_process_group() -> None:
    """A DDP stage's rank tears its process group down before the interpreter exits. A rank that
    leaves early (the others return while rank 0 exports) and exits with gloo's threads still
    running aborts ("terminate called without an active exception"), and srun then cancels the
    whole step. No barrier: a rank must not wait on one that failed."""
    torch = sys.modules.get("torch")  # only a stage that imported torch can have a group
    if torch is None:
        return
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _task_overrides() -> list[str]:
    """The overrides this run was composed with (a recipe never replaces a key they set)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    # unresolved: an override's value may interpolate the job's config (`${paths.conf_dir}/...`)
    overrides = OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)
    return [str(o) for o in overrides] if isinstance(overrides, list) else []


def _run_folder(cfg: DictConfig) -> str:
    from hydra.core.hydra_config import HydraConfig

    explicit = cfg.get("run_dir")
    return str(explicit or (HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else "."))


def _fail_disk_full(exc: BaseException, full: OSError) -> None:
    """Exit with EXIT_DISK_FULL, which the worker reports naming the path even when this line
    cannot be written (the log is usually on the full disk)."""
    import traceback

    from hydra.core.hydra_config import HydraConfig

    where = HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else "."
    try:
        traceback.print_exception(exc, file=sys.stderr)
        print(f"error[disk_full]: {describe_disk_full(where, full)}", file=sys.stderr, flush=True)
    except OSError:
        pass
    sys.exit(EXIT_DISK_FULL)


def ptmlab_error_in_chain(exc: BaseException | None) -> PtmlabError | None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, PtmlabError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _is_multirun(argv: list[str]) -> bool:
    return any(a in ("-m", "--multirun") for a in argv)


def _enter_job_base() -> None:
    """A job a worker runs reads relative paths from PTMLAB_HOME, the base the API checked them
    against, never from the folder the worker happened to start in (its `.env`, its checkout)."""
    settings = get_settings()
    if settings.job_id:
        os.chdir(settings.home)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    _enter_job_base()
    # Validate a single run up front so a bad override gives one clear line instead of Hydra's
    # multi-line report (a sweep is validated per job by the launcher).
    if not _is_multirun(argv) and not any(a.startswith("-") for a in argv):
        try:
            compose_config(argv)
        except PtmlabError as exc:
            _fail(exc)
    sys.argv = [sys.argv[0], *argv]
    _hydra_main()


if __name__ == "__main__":
    main()

"""`ptmlab doctor`: is this machine ready to run ptmlab? One line per check, and what to do when
one fails. Read-only: it migrates nothing and creates nothing."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from ptmlab.settings import Settings, get_settings, redact

MIN_FREE_BYTES = 5 * 2**30
MIN_PYTHON = (3, 11)


@dataclass
class Check:
    name: str
    ok: bool | None  # None: a warning (works, but worth knowing)
    detail: str
    fix: str = ""


def check_python(_: Settings) -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] >= MIN_PYTHON:
        return Check("python", True, f"{version} ({sys.executable})")
    return Check(
        "python", False, version, f"use Python >= {'.'.join(map(str, MIN_PYTHON))} (make venv uses python3.11)"
    )


def check_torch(_: Settings) -> Check:
    if importlib.util.find_spec("torch") is None:
        return Check(
            "torch",
            None,
            "not installed: this install can serve the API and dashboard but run no jobs",
            "pip install -c constraints.txt -e . (workers need torch)",
        )
    # In a child process: importing torch costs a second and CUDA initialisation belongs to jobs.
    code = (
        "import torch; c = torch.cuda.is_available(); "
        "print(torch.__version__, torch.version.cuda or 'cpu', torch.cuda.device_count() if c else 0, "
        "torch.cuda.get_device_name(0) if c else '-', sep='|')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return Check(
            "torch",
            False,
            (out.stderr.strip().splitlines() or ["import failed"])[-1],
            "reinstall torch (pinned in constraints.txt)",
        )
    version, build, count, name = out.stdout.strip().split("|")
    devices = f"{count} GPU(s): {name}" if int(count) else "no GPU: jobs run on CPU"
    return Check("torch", True, f"{version}, {'CUDA ' + build if build != 'cpu' else 'CPU build'}; {devices}")


def check_database(settings: Settings) -> Check:
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from ptmlab.db import MIGRATIONS_DIR, check_database_url
    from ptmlab.errors import PtmlabError

    url = settings.resolved_database_url
    shown = redact(url, settings)
    try:
        check_database_url(url)
    except PtmlabError as exc:
        return Check("database", False, str(exc), "percent-encode the URL's user name and password")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(config).get_current_head()
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return Check(
            "database", None, f"{shown} does not exist yet", "it is created by `ptmlab up`, `serve` or `worker`"
        )
    engine = sa.create_engine(url, connect_args={"connect_timeout": 5} if url.startswith("postgresql") else {})
    try:
        with engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
    except sa.exc.SQLAlchemyError as exc:
        reason = redact(" ".join(str(exc.orig or exc).split())[:200], settings)
        return Check("database", False, f"{shown}: {reason}", "start the database or fix PTMLAB_DATABASE_URL")
    finally:
        engine.dispose()
    if current != head:
        return Check(
            "database",
            False,
            f"{shown} at revision {current or 'none'}, code expects {head}",
            "run `ptmlab up` (or any worker/serve) once: it migrates to head",
        )
    return Check("database", True, f"{shown}, migrated (revision {head})")


def check_mlflow(settings: Settings) -> Check:
    uri = settings.resolved_tracking_uri
    if uri.startswith(("http://", "https://")):
        import httpx

        try:
            answer = httpx.get(uri.rstrip("/") + "/health", timeout=5)
        except httpx.HTTPError as exc:
            return Check("mlflow", False, f"{uri}: {exc}", "start the MLflow server or fix MLFLOW_TRACKING_URI")
        if answer.status_code != 200:
            return Check(
                "mlflow", False, f"{uri}/health answered {answer.status_code}", "check the MLflow server's log"
            )
        return Check("mlflow", True, f"{uri} (server answers)")
    if uri.startswith("sqlite:///"):
        folder = Path(uri.removeprefix("sqlite:///")).parent
        if folder.exists() and not os.access(folder, os.W_OK):
            return Check(
                "mlflow", False, f"{uri}: {folder} is not writable", "fix the folder's permissions or PTMLAB_HOME"
            )
        return Check("mlflow", True, f"{uri} (embedded store; artifacts in {settings.artifact_root})")
    return Check(
        "mlflow", None, f"{uri}: not checked", "MLflow 3 wants a database store (sqlite:/// or an http server)"
    )


def check_data(settings: Settings) -> Check:
    if settings.data_dir is None:
        return Check(
            "data",
            None,
            "PTMLAB_DATA_DIR not set: GLUE/SentEval/UD/corpus configs will not find their files",
            "export PTMLAB_DATA_DIR=<folder with glue/ senteval/ ud/ corpus/>",
        )
    root = Path(settings.data_dir)
    if not root.is_dir():
        return Check("data", False, f"PTMLAB_DATA_DIR={root} is not a folder", "point it at the shared data folder")
    present = [d for d in ("glue", "senteval", "ud", "corpus") if (root / d).is_dir()]
    missing = [d for d in ("glue", "senteval", "ud", "corpus") if d not in present]
    if missing:
        return Check(
            "data",
            None,
            f"{root}: has {', '.join(present) or 'none'}; missing {', '.join(missing)}",
            "configs that read the missing folders will fail naming the path",
        )
    return Check("data", True, f"{root}: glue, senteval, ud, corpus")


def check_disk(settings: Settings) -> Check:
    folder = Path(settings.home)
    while not folder.exists():
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    text = f"{free / 2**30:.1f} GiB free under {settings.home}"
    if free < MIN_FREE_BYTES:
        return Check(
            "disk", False, text, f"free space: checkpoints and activation caches need > {MIN_FREE_BYTES // 2**30} GiB"
        )
    return Check("disk", True, text)


CHECKS: tuple[Callable[[Settings], Check], ...] = (
    check_python,
    check_torch,
    check_database,
    check_mlflow,
    check_data,
    check_disk,
)


def run_doctor(out=sys.stdout) -> int:
    settings = get_settings()
    failed = 0
    for check in CHECKS:
        try:
            result = check(settings)
        except Exception as exc:
            result = Check(check.__name__.removeprefix("check_"), False, f"{type(exc).__name__}: {exc}")
        mark = {True: "ok  ", False: "FAIL", None: "warn"}[result.ok]
        print(f"{mark} {result.name:<9} {result.detail}", file=out)
        if result.fix and result.ok is not True:
            print(f"     {'':<9} -> {result.fix}", file=out)
        failed += result.ok is False
    print(f"{'all checks passed' if not failed else f'{failed} check(s) failed'}", file=out)
    return 1 if failed else 0

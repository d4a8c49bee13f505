"""The platform's one bridge to the science half: everything of lightning_modules that platform
code runs in its own process goes through here (a job's stage runs in `python -m ptmlab.run`, which
instantiates the configured `_target_`, never through an import). Each function imports torch and
lightning_modules on call, never at import, so `import ptmlab` stays cheap.
tests/lightning_modules/test_import_layers.py fails on any other import of lightning_modules from
platform/ptmlab, a string import (`importlib.import_module`) included."""

from __future__ import annotations

from typing import Any


def load_saved_task_model(ref: str, tracking_uri: str | None, **kwargs: Any) -> Any:
    """lightning_modules/artifacts/saved_task_model.py's `load_task_model` for a local reference."""
    from lightning_modules.artifacts.saved_task_model import load_task_model

    return load_task_model(ref, tracking_uri=tracking_uri, **kwargs)


def preload_stages() -> None:
    """Import the stage modules a warm launcher forks jobs from (ptmlab/worker/warm_start.py)."""
    import lightning_modules.stages.compress
    import lightning_modules.stages.finetune
    import lightning_modules.stages.pretrain
    import lightning_modules.stages.probe  # noqa: F401 - imported to be in sys.modules before the fork

"""The stage functions `ptmlab.run` calls, and the kit they are built from:

    build_finetune(cfg)        the parts of a finetune run (finetune.py)
    evaluate(model, task, split, tokenizer=...)   the task's GLUE metrics (evaluation.py)
    load_task_model(ref)       a saved task model, ready to call (task_model.py)

Imported lazily: `import lightning_modules.stages` pulls in neither torch nor Lightning.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "build_finetune": "lightning_modules.stages.finetune",
    "build_multitask": "lightning_modules.stages.multitask",
    "evaluate": "lightning_modules.stages.evaluation",
    "predict": "lightning_modules.stages.evaluation",
    "load_task_model": "lightning_modules.stages.task_model",
    "save_task_model": "lightning_modules.stages.task_model",
    "LoadedTaskModel": "lightning_modules.stages.task_model",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)

"""Bad input in process, in the order `python -m ptmlab.run` meets it before any work: the config
composed and checked, the stage's preflight (`stage.preflight`: inputs read before the training
stack is imported), then the stage's builder that its entry calls before it opens a run.

Each `python -m ptmlab.run` costs its imports (~10 s; 20-70 s under the suite's load), so one real
entry-point run per stage proves exit 2 and the one line (finetune: test_token_classification.py
from the preflight, test_prompt_based.py from the stage's builder; pretrain: test_pretrain_stage.py;
compress: test_compression.py; attack: test_attack_stage.py); a task kind's or a mode's own bad
input goes through this."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest


def error_line_before_work(overrides: Sequence[str], monkeypatch, build: Callable | None = None) -> str:
    """`error[<code>]: <message>` as ptmlab.run prints it for the first error on `overrides`:
    at compose time, in the stage's preflight, or in `build` (the stage's builder) after it."""
    from hydra.utils import get_method

    from ptmlab.config import compose_config
    from ptmlab.run import ptmlab_error_in_chain

    with pytest.raises(Exception) as raised:
        cfg = compose_config(overrides)
        read_ahead = get_method(cfg.stage.preflight)(cfg)
        if build is not None:
            build(cfg, read_ahead)  # as the stage's entry hands it what the preflight read
    error = ptmlab_error_in_chain(raised.value)  # as ptmlab.run reports it, not Hydra's instantiate wrapper
    assert error is not None, repr(raised.value)
    line = f"error[{error.code}]: {error}"
    assert "\n" not in line, line
    return line

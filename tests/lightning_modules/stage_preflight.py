"""Bad input through a stage's preflight in process: what `python -m ptmlab.run` calls before the
stage's training stack (`stage.preflight` of the composed config), and the one line it prints.

Each `python -m ptmlab.run` costs its imports (~10 s, 20-70 s under the suite's load), so one
real entry-point run per stage proves exit 2 and the one line (finetune:
test_token_classification.py, pretrain: test_pretrain_stage.py, compress: test_compression.py,
attack: test_attack_stage.py); a task kind's own bad input goes through this, in process."""

from __future__ import annotations

import pytest


def preflight_error_line(cfg, monkeypatch) -> str:
    """`error[<code>]: <message>` as ptmlab.run prints it for the error the preflight raises on `cfg`."""
    from hydra.utils import get_method

    from lightning_modules.data import corpus_tokenizer
    from lightning_modules.tasks import spec
    from ptmlab.run import ptmlab_error_in_chain

    # what a preflight reads ahead is for a stage that does not run here
    monkeypatch.setattr(spec, "_READ_AHEAD", {})
    monkeypatch.setattr(corpus_tokenizer, "_READ_AHEAD", {})
    with pytest.raises(Exception) as raised:
        get_method(cfg.stage.preflight)(cfg)
    error = ptmlab_error_in_chain(raised.value)  # as ptmlab.run reports it, not Hydra's instantiate wrapper
    assert error is not None, repr(raised.value)
    line = f"error[{error.code}]: {error}"
    assert "\n" not in line, line
    return line

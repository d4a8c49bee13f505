"""Composing configs and refusing bad ones with one line, before any work starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ptmlab.config import compose_config, list_config_groups
from ptmlab.errors import ConfigError


def test_default_config_composes():
    cfg = compose_config([])
    assert cfg.stage.name == "pretrain" and cfg.model.family == "encoder" and cfg.objective.name == "mlm"


@pytest.mark.parametrize(
    "overrides, needle",
    [
        (["model=nope"], "model/nope"),
        (["trainer.nonexistent_key=1"], "trainer.nonexistent_key"),
        (["objective=mlm", "model=gpt_tiny"], "objective=mlm"),
        (["objective=clm", "model=bert_tiny"], "objective=clm"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(overrides, needle):
    with pytest.raises(ConfigError) as info:
        compose_config(overrides)
    message = str(info.value)
    assert needle in message and "\n" not in message


def test_incompatible_objective_lists_valid_families():
    with pytest.raises(ConfigError, match="valid families for objective=clm: decoder"):
        compose_config(["model=bert_tiny", "objective=clm"])


def test_catalogue_lists_groups_and_options():
    groups = list_config_groups()
    assert {"bert_tiny", "gpt_tiny", "bert_base", "gpt2_small", "bert_mini"} <= set(groups["model"])
    assert {"cpu", "gpu", "ddp"} <= set(groups["trainer"])


@pytest.mark.parametrize(
    "overrides, needle",
    [
        (["model=nope"], "model/nope"),
        (["model=gpt_tiny"], "objective=mlm"),
        (["trainer.max_stepz=3"], "trainer.max_stepz"),
    ],
)
def test_entry_point_fails_fast_with_one_line(tmp_path, overrides, needle):
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", *overrides], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("error[config_error]")
    assert not (tmp_path / "home").exists()  # nothing was created: no work started

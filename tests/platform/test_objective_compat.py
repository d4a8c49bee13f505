"""Objective × model compatibility: every refused combination fails at compose time through the
real entry point (`python -m ptmlab.run`: exit code 2, one line on stderr listing the valid
families), before any work; and the docs' compatibility table matches the configs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ptmlab.config import CONF_DIR, compose_config

ROOT = Path(__file__).resolve().parents[2]

REFUSED = [
    # (overrides, text the one error line must contain)
    (["model=elmo_tiny", "objective=plm"], "valid families for objective=plm: permutation"),
    (["model=bert_tiny", "objective=dae"], "valid families for objective=dae: encoder_decoder"),
    (["model=gpt_tiny", "objective=span_corruption"], "valid families for objective=span_corruption: encoder_decoder"),
    (["model=xlnet_tiny", "objective=mass"], "valid families for objective=mass: encoder_decoder"),
    (["model=bert_tiny", "objective=rtd"], "valid families for objective=rtd: electra"),
    (["model=gpt_tiny", "objective=bilm"], "valid families for objective=bilm: lstm"),
    (["model=elmo_tiny", "objective=mlm_nsp"], "valid families for objective=mlm_nsp: encoder, hf"),
    (["model=bart_tiny", "objective=unilm"], "valid families for objective=unilm: encoder"),
    (
        ["model=electra_tiny", "objective=tlm", "data=parallel_text", "data.corpus.path=x"],
        "valid families for objective=tlm: encoder",
    ),
    (["model=gpt_tiny", "objective=contrastive"], "valid families for objective=contrastive: encoder, hf"),
    (["experiment=bert", "data.construction=packed"], "objective=mlm_nsp needs data.construction=segment_pairs"),
    (["experiment=albert", "data.pair_negative=random_document"], "objective=mlm_sop needs data.pair_negative=swap"),
    (["objective=tlm"], "objective=tlm needs data.name=parallel_text"),
    (
        ["objective=mlm_nsp", "data.pair_negative=sideways"],
        "data.pair_negative='sideways': expected one of 'random_document', 'swap', 'none'",
    ),
]


@pytest.mark.parametrize("overrides, needle", REFUSED, ids=[" ".join(o) for o, _ in REFUSED])
def test_invalid_combination_is_refused_by_the_entry_point(overrides, needle, tmp_path):
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", *overrides],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert not (tmp_path / "home" / "runs").exists()  # refused before any work


def test_every_objective_composes_with_each_listed_family():
    """The other direction: every family an objective lists has a model config it composes with."""
    models = {p.stem: OmegaConf.load(p) for p in (CONF_DIR / "model").glob("*.yaml")}
    for path in sorted((CONF_DIR / "objective").glob("*.yaml")):
        node = OmegaConf.load(path)
        extra = []
        if "name" in (node.get("requires_data") or {}):
            extra = [f"data={node.requires_data.name}", "data.corpus.path=x"]
        for family in node.compatible_families:
            candidates = sorted(name for name, m in models.items() if m.family == family)
            if not candidates:
                continue  # e.g. hf before its model config exists
            cfg = compose_config([f"objective={path.stem}", f"model={candidates[0]}", *extra])
            assert cfg.model.family == family


def test_readme_compatibility_table_is_up_to_date(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "compat_table.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import compat_table
    finally:
        sys.path.pop(0)
    table = compat_table.render()
    assert table in (ROOT / "docs" / "guide" / "pretraining.md").read_text()
    assert "| `plm` | · | · | · | · | ✓ | · | · |" in table  # one row checked by hand
    # The script itself refuses a README without the markers.
    readme = tmp_path / "README.md"
    readme.write_text("# nothing here\n")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "compat_table.py"), "--check", "--readme", str(readme)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "compat-table:start" in proc.stderr

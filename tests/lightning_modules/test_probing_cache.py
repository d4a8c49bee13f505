"""The activation cache survives a kill: a real `python -m ptmlab.run stage=probe` is killed with
SIGKILL after some shards are written; the same job run again extracts only the missing shards,
and every shard equals the one an uninterrupted extraction writes (bit for bit). The resumed job
and the uninterrupted reference run in this process (on one thread, as the killed one did): the
kill needs a process of its own, two more `python -m ptmlab.run` only paid their imports again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

pytestmark = pytest.mark.slow

OVERRIDES = [
    "stage=probe",
    "probe=upos",
    "model=minilm",
    "probe.data.max_train_sentences=240",
    "probe.data.max_eval_sentences=40",
    "stage.shard_sentences=8",
    "stage.batch_size=8",
    "stage.random_init_baseline=false",
    "stage.token.epochs=1",
    "stage.token.scalar_mix=false",
]


def command(run_dir: Path, cache_dir: Path) -> list[str]:
    return [sys.executable, "-m", "ptmlab.run", *OVERRIDES, f"paths.cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"]


def environment(home: Path) -> dict:
    # One thread: the same reduction order in every process, so activations compare bit for bit.
    return {**os.environ, "PTMLAB_HOME": str(home), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run_in_process(run_dir: Path, cache_dir: Path) -> dict:
    from lightning_modules.probing.fit import one_thread
    from lightning_modules.stages.probe import run_probe
    from ptmlab.config import compose_config

    with one_thread():  # the subprocesses' OMP_NUM_THREADS=1: the same reduction order
        return run_probe(compose_config([*OVERRIDES, f"paths.cache_dir={cache_dir}", f"+run_dir={run_dir}"]))


def shards(cache_dir: Path) -> dict[str, list[Path]]:
    root = cache_dir / "activations"
    return {d.name: sorted(d.glob("shard_*.safetensors")) for d in root.iterdir()} if root.is_dir() else {}


def test_a_killed_extraction_resumes_and_gives_identical_activations(tmp_path, data_dir, ptmlab_home):
    home, cache = ptmlab_home, tmp_path / "cache"
    proc = subprocess.Popen(
        command(tmp_path / "killed", cache), env=environment(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.time() + 300
    try:
        while time.time() < deadline and proc.poll() is None:
            if any(len(files) >= 3 for files in shards(cache).values()):
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None and time.time() >= deadline:
            proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    ((key, before),) = shards(cache).items()  # killed inside the first (training) extraction
    manifest = (
        json.loads((cache / "activations" / key / "manifest.json").read_text())
        if (cache / "activations" / key / "manifest.json").exists()
        else {"complete": False}
    )
    assert not manifest["complete"] and 3 <= len(before) < 30  # 240 sentences / 8 per shard
    written_before = {p.name: p.stat().st_mtime_ns for p in before}

    resumed_summary = run_in_process(tmp_path / "resumed", cache)
    reference_summary = run_in_process(tmp_path / "reference", tmp_path / "reference_cache")

    after, full = shards(cache), shards(tmp_path / "reference_cache")
    assert set(after) == set(full)  # same keys: model hash + data hash + alignment
    assert len(after[key]) == 30
    torn = [*(cache / "activations" / key).glob(".*.tmp"), *(cache / "activations" / key).glob(".tmp*")]
    assert not torn  # a torn temporary shard is cleared
    for p in after[key]:
        if p.name in written_before:  # the shards written before the kill were kept, not redone
            assert p.stat().st_mtime_ns == written_before[p.name]
    for entry in after:
        for mine, theirs in zip(after[entry], full[entry], strict=True):
            a, b = load_file(str(mine)), load_file(str(theirs))
            assert a["lengths"].equal(b["lengths"]) and a["states"].equal(b["states"]), (entry, mine.name)
    passes = resumed_summary["extraction"]["minilm"]["forward_passes"]
    assert 0 < passes < reference_summary["extraction"]["minilm"]["forward_passes"]  # only the missing shards
    assert resumed_summary["tasks"][0]["layers"] == reference_summary["tasks"][0]["layers"]

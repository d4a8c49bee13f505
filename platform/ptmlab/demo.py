"""`make demo` / `ptmlab demo`: pre-train a tiny MLM encoder and a tiny causal decoder on the
offline corpus, end to end, then print a table and how to open the MLflow UI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ptmlab.settings import get_settings

DEMO_JOBS = [
    ("mlm", ["stage=pretrain", "model=bert_tiny", "objective=mlm", "tokenizer=wordpiece"]),
    ("clm", ["stage=pretrain", "model=gpt_tiny", "objective=clm", "tokenizer=bpe"]),
]


def demo_overrides(steps: int) -> list[tuple[str, list[str]]]:
    common = ["data=offline", f"trainer.max_steps={steps}", f"trainer.val_check_interval={min(100, steps)}",
              "+tags.demo=true"]
    return [(name, [*overrides, *common]) for name, overrides in DEMO_JOBS]


def _print_table(rows: list[dict]) -> None:
    header = f"{'objective':<10} {'model':<10} {'steps':>6} {'val loss':>9} {'perplexity':>11}  mlflow run id"
    print(header)
    print("-" * len(header))
    def fmt(value, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    for r in rows:
        print(f"{r['objective']:<10} {r['model']:<10} {r['steps']:>6} {fmt(r.get('val_loss'), '9.3f'):>9} "
              f"{fmt(r.get('val_perplexity'), '11.1f'):>11}  {r['mlflow_run_id']}")


def run_demo(steps: int = 300) -> int:
    settings = get_settings()
    home = settings.home
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PTMLAB_HOME": str(home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    rows = []
    for name, overrides in demo_overrides(steps):
        run_dir = home / "runs" / "demo" / name
        print(f"\n== pretraining {name}: {' '.join(overrides)}", flush=True)
        cmd = [sys.executable, "-m", "ptmlab.run", *overrides, f"hydra.run.dir={run_dir}"]
        proc = subprocess.run(cmd, env=env)
        if proc.returncode != 0:
            print(f"demo job '{name}' failed with exit code {proc.returncode}", file=sys.stderr)
            return proc.returncode
        rows.append(json.loads((Path(run_dir) / "summary.json").read_text()))
    print()
    _print_table(rows)
    uri = settings.resolved_tracking_uri
    print(f"\nMLflow store: {uri}")
    print(f"Open the MLflow UI:  .venv/bin/mlflow ui --backend-store-uri {uri} --host 127.0.0.1 --port {settings.mlflow_ui_port}")
    print(f"                     then browse http://127.0.0.1:{settings.mlflow_ui_port}")
    return 0

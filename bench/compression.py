"""The compression trade-off table for every method in one run, latencies measured side by side.

Takes a fine-tuned source (a finetune run folder, e.g. the SST-2 MiniLM of the realistic tests)
and compress runs of it (`--runs`, or every compress run found under `--find`), runs any method
not among them through the compress stage (`--make-missing`, training on `--train-rows` rows),
then measures each compressed model beside the source in this one process with
lightning_modules/compression/measure.py: at batch 1 and 32, sequence length 64, one thread
and all cores, the median of `--repeats` (≥ 30) timed runs after warm-up, source and
compressed alternating. Scores and retention are the compress runs' own (full dev split,
measured by the stage). Prints the settings (CPU model, ISA flags, quantized engine, threads)
and the table, then the issue's latency checks:

    int8 (quantize_dynamic)  latency ratio ≤ 0.45 at 1 thread, batch 32
    3-layer distilled        speed-up ≥ 1.6× at 1 thread, batch 32

    PTMLAB_DATA_DIR=../shared/data .venv/bin/python bench/compression.py --source <finetune run> \\
        --find <folder of compress runs> --make-missing --train-rows 2000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
METHODS = [
    "quantize_dynamic",
    "quantize_qat",
    "cast_half",
    "distill",
    "prune_heads",
    "prune_magnitude",
    "drop_layers",
    "low_rank",
    "theseus",
]
CHECKS = {"quantize_dynamic": ("latency_ratio", "b32_t1", "<=", 0.45), "distill": ("speedup", "b32_t1", ">=", 1.6)}
TASK = ["task=glue/sst2", "task.max_length=64"]


def find_runs(folder: Path, source: Path) -> dict[str, Path]:
    """method -> newest compress run folder under `folder` whose source is `source`."""
    found: dict[str, tuple[float, Path]] = {}
    for path in folder.rglob("summary.json"):
        try:
            s = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if s.get("stage") != "compress":
            continue
        src = Path(str(s.get("source_dir", ""))).resolve()
        if source.resolve() not in (src, src.parent, src.parent.parent):
            continue
        mtime = path.stat().st_mtime
        if s["method"] not in found or found[s["method"]][0] < mtime:
            found[s["method"]] = (mtime, path.parent)
    return {m: p for m, (_, p) in found.items()}


def make(method: str, source: Path, train_rows: int, home: Path) -> Path:
    """One compress run of `method` through the real entry point (few timing repeats: the bench
    measures latency itself)."""
    import subprocess

    run_dir = home / "runs" / method
    env = {**os.environ, "PTMLAB_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = [
        sys.executable,
        "-m",
        "ptmlab.run",
        "stage=compress",
        f"compression={method}",
        *TASK,
        f"task.max_train_samples={train_rows}",
        f"source={source}",
        "stage.measure.repeats=1",
        "stage.measure.warmup=0",
        "stage.measure.threads=[0]",
        "stage.measure.batch_sizes=[1]",
        f"hydra.run.dir={run_dir}",
    ]
    print(f"compressing: {method} ({train_rows} training rows)", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{method} failed:\n{proc.stderr[-3000:]}")
    return run_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", required=True, type=Path, help="the fine-tuned source (run or task model folder)")
    parser.add_argument("--runs", nargs="*", type=Path, default=[], help="compress run folders")
    parser.add_argument(
        "--find", type=Path, default=None, help="take every compress run of the source under this folder"
    )
    parser.add_argument("--make-missing", action="store_true", help="run the methods not found (compress stage)")
    parser.add_argument("--methods", nargs="*", default=METHODS, help="the methods of the table (default: all)")
    parser.add_argument("--train-rows", type=int, default=8000, help="training rows of the runs made here")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--format", choices=("table", "csv", "latex"), default="table")
    args = parser.parse_args()
    if args.repeats < 30:
        print(f"note: --repeats {args.repeats} < 30, below what the issue asks for a latency", file=sys.stderr)

    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.compression.measure import MeasureSettings, all_cores, cpu_description, latencies
    from ptmlab.cli.results_compression import render_rows  # the CLI's renderer, the bench's columns
    from ptmlab.contracts.summaries import lift_flat_measurements

    runs = {}
    if args.find:
        runs.update(find_runs(args.find, args.source))
    for run in args.runs:
        runs[json.loads((run / "summary.json").read_text())["method"]] = run
    if args.make_missing:
        home = Path(tempfile.mkdtemp(prefix="bench_compression_"))
        for method in args.methods:
            if method not in runs:
                runs[method] = make(method, args.source, args.train_rows, home)
    # each summary in the contract's shape (a run written before its measurements were nested too)
    summaries = {
        m: lift_flat_measurements(json.loads((runs[m] / "summary.json").read_text())) for m in args.methods if m in runs
    }
    missing = [m for m in args.methods if m not in runs]
    if missing:
        print(f"no run of {', '.join(missing)} (--make-missing runs them)", file=sys.stderr)

    settings = MeasureSettings(
        seq_len=args.seq_len, batch_sizes=[1, 32], threads=[1, 0], warmup=args.warmup, repeats=args.repeats, score=False
    )
    source = load_task_model(args.source)
    rows = []
    for method, s in summaries.items():
        compressed = load_task_model(s["task_model_dir"])
        src, out = latencies(
            [source.model, compressed.model], [len(source.tokenizer), len(compressed.tokenizer)], settings
        )
        ratio = {k: out[k]["latency_ms"] / src[k]["latency_ms"] for k in out}
        rows.append({**s, "latency_ratio_bench": ratio, "speedup_bench": {k: 1 / v for k, v in ratio.items()}})
        print(f"measured {method}", file=sys.stderr, flush=True)

    import torch

    cpu = cpu_description()
    keys = list(rows[0]["latency_ratio_bench"]) if rows else []
    print(
        f"settings: device cpu ({cpu['cpu']}; ISA {', '.join(cpu['isa']) or '-'}; {cpu['cores']} cores, "
        f"{all_cores()} usable); "
        f"torch {torch.__version__}, quantized engine {torch.backends.quantized.engine}; seq len {args.seq_len}; "
        f"median of {args.repeats} after {args.warmup} warm-up, source and compressed alternating; "
        f"settings {', '.join(keys)} (b<batch>_t<threads>)"
    )
    table = []
    for r in rows:
        line = {
            "method": r["method"],
            "retention": r.get("retention"),
            "score": r["compressed"].get("score"),
            "source_score": (r.get("source") or {}).get("score"),
            "size_ratio": r.get("size_ratio"),
            "param_ratio": r.get("param_ratio"),
            "flops_ratio": r.get("flops_ratio"),
        }
        for k in keys:
            line[f"lat_{k}"] = r["latency_ratio_bench"][k]
        line["speedup"] = r["speedup_bench"].get("b32_t1")
        table.append(line)
    columns = [
        ("method", "method", "s"),
        ("score", "score", ".4f"),
        ("source", "source_score", ".4f"),
        ("retention", "retention", ".4f"),
        ("size ratio", "size_ratio", ".4f"),
        ("param ratio", "param_ratio", ".4f"),
        ("FLOPs ratio", "flops_ratio", ".4f"),
        *[(f"latency ratio {k}", f"lat_{k}", ".3f") for k in keys],
        ("speed-up b32_t1", "speedup", ".2f"),
    ]
    sys.stdout.write(render_rows(table, args.format, columns))
    failed = 0
    for r in rows:
        check = CHECKS.get(r["method"])
        if not check:
            continue
        field, key, op, bound = check
        value = r[f"{field}_bench"].get(key)
        ok = value is not None and (value <= bound if op == "<=" else value >= bound)
        failed += not ok
        print(
            f"{'PASS' if ok else 'FAIL'}: {r['method']} {field.replace('_', ' ')} at {key} = "
            f"{value:.3f} (goal {op} {bound})"
        )
    for r in rows:
        if r.get("control_score") is not None:
            print(
                f"distill control (the same student without the teacher): {r['control_score']:.4f} "
                f"vs distilled {r['score']:.4f}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())

#!/usr/bin/env bash
# Every GPU benchmark in one command; each writes JSON, and the tables are gathered into one
# Markdown file:
#
#   bench/gpu.sh [OUT_DIR]        (default bench/results/gpu-<UTC time>)
#
#   1. gpu_throughput.py     BERT-base MLM seq 128/512, GPT-2 small CLM seq 1024, bf16, eager vs compiled
#   2. overhead.py           pre-training step: ptmlab ÷ plain PyTorch loop, on the GPU
#   3. finetune_overhead.py  fine-tuning step: ptmlab ÷ plain loop ÷ Hugging Face Trainer, on the GPU
#   4. generation.py         decoding: ptmlab ÷ generate() (T5/BART/GPT tiny, greedy and beam 4)
#
# On a machine without a CUDA device it runs what means something there (the CPU overhead
# benchmarks, and gpu_throughput.py --cpu-smoke to check that script still runs) and says which
# GPU parts it skipped. PYTHON (default .venv/bin/python), PTMLAB_DATA_DIR (default ../shared/data),
# STEPS and ROUNDS (overhead benchmarks), THROUGHPUT_STEPS (gpu_throughput.py's timed steps) and
# CPU_TOO=0 (on a GPU machine, skip the CPU overhead runs) can be set in the environment.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${1:-bench/results/gpu-$(date -u +%Y%m%dT%H%M%SZ)}
STEPS=${STEPS:-30}
ROUNDS=${ROUNDS:-3}
THROUGHPUT_STEPS=${THROUGHPUT_STEPS:-60}
export PTMLAB_DATA_DIR=${PTMLAB_DATA_DIR:-../shared/data}
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} HF_DATASETS_OFFLINE=${HF_DATASETS_OFFLINE:-1}
mkdir -p "$OUT"
MD="$OUT/gpu_benchmarks.md"
STATUS=0

GPU_NAME=$("$PY" -c "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')")
{
  echo "# ptmlab GPU benchmarks"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) · git $(git rev-parse --short HEAD 2>/dev/null || echo '?') · device: ${GPU_NAME:-none (CPU only)}"
  echo
} > "$MD"

run() {  # name, log file, command...
  local name=$1 log=$2
  shift 2
  echo "== $name: $*"
  if "$@" 2>&1 | tee "$log"; then :; else
    echo "!! $name failed (see $log)"
    STATUS=1
    echo "**$name failed** (exit code; see $(basename "$log"))" >> "$MD"
  fi
}

if [ -n "$GPU_NAME" ]; then
  run gpu_throughput "$OUT/gpu_throughput.log" "$PY" bench/gpu_throughput.py --steps "$THROUGHPUT_STEPS" \
      --json "$OUT/gpu_throughput.json" --markdown "$OUT/gpu_throughput.md"
  [ -f "$OUT/gpu_throughput.md" ] && cat "$OUT/gpu_throughput.md" >> "$MD"
  DEVICES="gpu"
  [ "${CPU_TOO:-1}" = 0 ] || DEVICES="gpu cpu"
else
  echo "no CUDA device: skipping gpu_throughput.py (BERT-base / GPT-2 small) and the --device gpu overhead runs"
  echo "No CUDA device: **skipped** gpu_throughput.py and the GPU overhead runs; ran the CPU parts only." >> "$MD"
  echo >> "$MD"
  run gpu_throughput_smoke "$OUT/gpu_throughput_smoke.log" "$PY" bench/gpu_throughput.py --cpu-smoke \
      --json "$OUT/gpu_throughput_smoke.json" --markdown "$OUT/gpu_throughput_smoke.md"
  [ -f "$OUT/gpu_throughput_smoke.md" ] && cat "$OUT/gpu_throughput_smoke.md" >> "$MD"
  DEVICES="cpu"
fi

{
  echo
  echo "### Framework overhead (median of alternating rounds; ratios of median step times)"
  echo
  echo "| benchmark | device | ptmlab ms/step | plain ms/step | HF Trainer ms/step | ptmlab ÷ plain | ptmlab ÷ HF |"
  echo "|---|---|---|---|---|---|---|"
} >> "$MD"
for device in $DEVICES; do
  run "overhead ($device)" "$OUT/overhead_$device.log" "$PY" bench/overhead.py --device "$device" \
      --steps $((STEPS * 2)) --pairs "$ROUNDS" --json "$OUT/overhead_$device.json"
  run "finetune_overhead ($device)" "$OUT/finetune_overhead_$device.log" "$PY" bench/finetune_overhead.py \
      --device "$device" --steps "$STEPS" --rounds "$ROUNDS" --json "$OUT/finetune_overhead_$device.json"
done
"$PY" - "$OUT" >> "$MD" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for path in sorted(out.glob("*overhead_*.json")):
    r = json.loads(path.read_text())
    ms = r.get("median_ms", {"ptmlab": r.get("ptmlab_ms"), "plain": r.get("plain_ms")})
    f = lambda v, d=1: "–" if v is None else f"{v:.{d}f}"
    print(f"| {r['bench']} ({r.get('model')}) | {r['device']} | {f(ms.get('ptmlab'))} | {f(ms.get('plain'))} | "
          f"{f(ms.get('hf'))} | {f(r.get('ratio_vs_plain'), 3)} | {f(r.get('ratio_vs_hf'), 3)} |")
EOF
run generation "$OUT/generation.log" "$PY" bench/generation.py --rounds "$ROUNDS" --json "$OUT/generation.json"
{ echo; echo "### Decoding: ptmlab ÷ generate() (median of alternating rounds)"; echo
  grep '^|' "$OUT/generation.log"; } >> "$MD"
echo
echo "wrote $MD and the JSON files beside it"
cat "$MD"
exit $STATUS

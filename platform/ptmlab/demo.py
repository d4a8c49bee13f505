"""`make demo` / `ptmlab demo`: the whole research loop on the embedded default, offline, through
the queue as one `demo` pipeline (conf/pipeline/demo.yaml): pre-train a tiny MLM encoder and a
tiny causal decoder, fine-tune each on the shipped sentiment task, compress the better one (int8
and a distilled student), probe both encoders for UPOS by layer with the control task; and the
packaged MiniLM through the same fine-tune -> int8 + distillation -> probe path. A worker runs it
while one line per job shows its progress; then a results table and where to look (the
dashboard's overview, leaderboard, compression, probing and pipeline pages all show it)."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from ptmlab.settings import get_settings

TERMINAL = ("succeeded", "failed", "cancelled")


def demo_spec(steps: int) -> dict[str, Any]:
    """The demo pipeline with `steps` pre-training steps (the other stages keep their sizes)."""
    from ptmlab.queue import load_pipeline

    spec = load_pipeline("demo")
    for job in spec["jobs"]:
        if job.get("stage") == "pretrain":
            job["overrides"] = [
                *job.get("overrides", []),
                f"trainer.max_steps={steps}",
                f"trainer.val_check_interval={min(100, steps)}",
            ]
    return spec


def _num(value, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def result_line(job: dict[str, Any], summary: dict[str, Any]) -> str:
    """What one job of the demo found, in words a researcher reads at a glance."""
    stage = job["stage"]
    if stage == "pretrain":
        return (
            f"{summary.get('objective')} on {summary.get('model')}: {summary.get('steps')} steps, "
            f"val loss {_num(summary.get('val_loss'))}, perplexity {_num(summary.get('val_perplexity'), '.1f')}"
        )
    if stage == "finetune":
        return (
            f"{summary.get('model')} on {summary.get('task')}: {summary.get('main_metric')} "
            f"{_num(summary.get('main_score'))}"
        )
    if stage == "compress":
        speedup = (summary.get("speedup") or {}).get(summary.get("headline_latency") or "", None)
        measured, source = summary.get("compressed") or {}, summary.get("source") or {}
        text = (
            f"{summary.get('method')} of {summary.get('model')}: "
            f"{summary.get('main_metric')} {_num(measured.get('score'))} "
            f"(source {_num(source.get('score'))}, retention {_num(summary.get('retention'))}), "
            f"size x{_num(summary.get('size_ratio'), '.2f')}, speed-up {_num(speedup, '.2f')}"
        )
        if summary.get("control_score") is not None:
            text += f", without the teacher {_num(summary['control_score'])}"
        return text
    if stage == "probe":
        tasks = summary.get("tasks") or []
        parts = []
        for t in tasks:
            random_best = (t.get("random_init") or {}).get("best_score")
            parts.append(
                f"{t.get('probe_task')} best layer {t.get('best_layer')} {_num(t.get('best_score'))} "
                f"(selectivity {_num(t.get('best_selectivity'))}, random init {_num(random_best)})"
            )
        return f"{summary.get('model')} ({probed_backbone(summary)}): " + "; ".join(parts)
    return ""


def probed_backbone(summary: dict[str, Any]) -> str:
    """Which weights a probe read: a job's pre-trained export, or a packaged checkpoint as shipped."""
    record = summary.get("backbone") or {}
    if record.get("source_job") is not None:
        return f"{record.get('source_stage')} job {record['source_job']}"
    return f"as packaged: {record.get('reference') or summary.get('backbone_source')}"


def _wait(job_ids: list[int], worker: subprocess.Popen) -> bool:
    from ptmlab.cli.progress_bars import ProgressBoard
    from ptmlab.db import session_scope
    from ptmlab.queue import get_job

    board = ProgressBoard()
    while True:
        with session_scope() as session:
            jobs = [get_job(session, i).to_dict() for i in job_ids]
        board.draw(jobs)
        if all(j["status"] in TERMINAL for j in jobs):
            return all(j["status"] == "succeeded" for j in jobs)
        if worker.poll() is not None:
            print(f"the demo worker exited ({worker.returncode}) before the jobs finished", file=sys.stderr)
            return False
        time.sleep(1.0)


def run_demo(steps: int = 300) -> int:
    from ptmlab.db import migrate, session_scope
    from ptmlab.queue import get_job, submit_pipeline
    from ptmlab.results import query_results

    settings = get_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    migrate()
    started = time.monotonic()
    with session_scope() as session:
        pipeline, jobs = submit_pipeline(session, demo_spec(steps))
        job_ids = [j.id for j in jobs]
        pipeline_id = pipeline.id
        print(
            f"queued pipeline {pipeline_id}: {len(job_ids)} jobs " + ", ".join(f"{j.id} ({j.name})" for j in jobs),
            flush=True,
        )

    worker = subprocess.Popen(
        [sys.executable, "-m", "ptmlab.cli", "worker", "--burst", "--cpu-slots", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ok = _wait(job_ids, worker)
    finally:
        if worker.poll() is None:
            worker.terminate()
            worker.wait(timeout=60)

    print()
    with session_scope() as session:
        jobs = [get_job(session, job_id).to_dict() for job_id in job_ids]
        width = max(len(job["name"]) for job in jobs)
        for job in jobs:
            results = query_results(session, job_id=job["id"])[0]
            found = result_line(job, results[0].summary) if results else (job.get("error") or "").splitlines()[:1]
            print(
                f"{job['id']:>4} {job['name']:<{width}} {job['status']:<9} "
                f"{found if isinstance(found, str) else ' '.join(found)}"
            )
    print(f"\n{'all' if ok else 'not all'} {len(job_ids)} jobs succeeded in {time.monotonic() - started:.0f} s")
    url = f"http://{settings.bind_host}:{settings.bind_port}"
    print(
        f"\nDashboard:  .venv/bin/ptmlab up   then open {url}/ (overview), {url}/pipelines/{pipeline_id} "
        f"(this pipeline), {url}/leaderboard, {url}/compression, {url}/probing"
    )
    uri = settings.resolved_tracking_uri
    print(
        f"MLflow UI:  .venv/bin/mlflow ui --backend-store-uri {uri} --host 127.0.0.1 --port {settings.mlflow_ui_port}"
        f"   then open http://127.0.0.1:{settings.mlflow_ui_port}"
    )
    return 0 if ok else 1

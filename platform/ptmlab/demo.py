"""`make demo` / `ptmlab demo`: the main job end to end on the embedded default, through the
queue — submit the `demo` pipeline (a tiny MLM encoder and a tiny causal decoder pre-trained on
the offline corpus), run a worker until it is done while showing progress, then print a table
and where to look: the MLflow UI and the dashboard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from ptmlab.settings import get_settings

TERMINAL = ("succeeded", "failed", "cancelled")


def demo_overrides(steps: int) -> list[str]:
    return [f"trainer.max_steps={steps}", f"trainer.val_check_interval={min(100, steps)}",
            "trainer.enable_progress_bar=false"]


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _print_table(rows: list[dict]) -> None:
    header = f"{'job':>4} {'objective':<10} {'model':<10} {'steps':>6} {'val loss':>9} {'perplexity':>11}  mlflow run id"
    print(header)
    print("-" * len(header))
    for job_id, r in rows:
        print(f"{job_id:>4} {r['objective']:<10} {r['model']:<10} {r['steps']:>6} {_fmt(r.get('val_loss'), '9.3f'):>9} "
              f"{_fmt(r.get('val_perplexity'), '11.1f'):>11}  {r['mlflow_run_id']}")


def _last_log_line(session, job_id: int) -> str:
    from ptmlab.queue import read_log

    try:
        chunk = read_log(session, job_id, tail=5)
    except Exception:  # noqa: BLE001 - no log yet
        return ""
    lines = [ln.strip() for ln in chunk.text.splitlines() if ln.strip()]
    return lines[-1][:100] if lines else ""


def run_demo(steps: int = 300) -> int:
    from ptmlab.db import migrate, session_scope
    from ptmlab.queue import get_job, submit_pipeline

    settings = get_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    migrate()
    with session_scope() as session:
        pipeline, jobs = submit_pipeline(session, "demo", overrides=demo_overrides(steps))
        job_ids = [j.id for j in jobs]
        names = {j.id: j.name for j in jobs}
        pipeline_id = pipeline.id
    print(f"queued pipeline {pipeline_id}: jobs {', '.join(f'{i} ({names[i]})' for i in job_ids)}", flush=True)

    env = {**os.environ, "PTMLAB_HOME": str(settings.home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    worker = subprocess.Popen([sys.executable, "-m", "ptmlab.cli", "worker", "--burst", "--cpu-slots", "1"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started, last_seen = time.time(), {}
    try:
        while True:
            with session_scope() as session:
                states = {i: get_job(session, i).status for i in job_ids}
                for job_id in job_ids:
                    line = _last_log_line(session, job_id) if states[job_id] == "running" else ""
                    seen = (states[job_id], line)
                    if last_seen.get(job_id) != seen:
                        last_seen[job_id] = seen
                        print(f"[{time.time() - started:6.0f}s] job {job_id} {names[job_id]:<14} {states[job_id]:<9} {line}",
                              flush=True)
            if all(s in TERMINAL for s in states.values()):
                break
            if worker.poll() is not None and any(s not in TERMINAL for s in states.values()):
                print(f"the demo worker exited ({worker.returncode}) before the jobs finished", file=sys.stderr)
                return 1
            time.sleep(2.0)
    finally:
        if worker.poll() is None:
            worker.terminate()
            worker.wait(timeout=60)

    rows = []
    with session_scope() as session:
        for job_id in job_ids:
            job = get_job(session, job_id)
            if job.status != "succeeded":
                print(f"job {job_id} ({names[job_id]}) {job.status}: {job.error or ''}", file=sys.stderr)
                return 1
            summary_path = os.path.join(job.run_dir, "summary.json")
            rows.append((job_id, json.loads(open(summary_path).read())))
    print()
    _print_table(rows)
    uri = settings.resolved_tracking_uri
    print(f"\nMLflow UI:  .venv/bin/mlflow ui --backend-store-uri {uri} --host 127.0.0.1 --port {settings.mlflow_ui_port}"
          f"   then open http://127.0.0.1:{settings.mlflow_ui_port}")
    print(f"Dashboard:  .venv/bin/ptmlab up   then open http://{settings.bind_host}:{settings.bind_port}/ "
          f"(jobs {', '.join(map(str, job_ids))} and their results are there)")
    return 0

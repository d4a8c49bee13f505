"""ptmlab on a real Slurm cluster (tests/platform/slurm_cluster.py: munged, slurmctld and two
slurmd on loopback): worker allocations claim and finish queued jobs exactly once; `scancel` of an
allocation mid-job hands the job back and another allocation finishes it from where it stopped;
a bad partition or an impossible request is refused with Slurm's message before anything is
submitted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from queue_by_url import get_job as job
from queue_by_url import list_attempts as attempts
from queue_by_url import submit_job as submit
from slurm_cluster import NODES, PARTITION, SlurmCluster, slurm_installed
from waiting import wait_until

from ptmlab import queue
from ptmlab.db import QUEUED, REQUEUED, RUNNING, SUCCEEDED, dispose_engines, get_sessionmaker


@pytest.fixture(scope="module")
def cluster():
    if not slurm_installed():
        msg = "Slurm (slurm-wlm, munge) missing (make test installs it: scripts/install_system_deps.sh)"
        if os.environ.get("PTMLAB_REQUIRE_DATA") == "1" or os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    c = SlurmCluster().start()
    yield c
    c.stop()


@pytest.fixture()
def platform(tmp_path, cluster):
    """A platform home + SQLite database shared by this test's process and the allocations' workers."""
    home = tmp_path / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'platform.db'}"
    env = {**cluster.env, "PTMLAB_HOME": str(home), "PTMLAB_DATABASE_URL": url}
    env.pop("MLFLOW_TRACKING_URI", None)
    yield home, url, env
    cluster.run("scancel", "--user=root")
    dispose_engines()


def ptmlab(env, *args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def workers(url):
    with get_sessionmaker(url)() as s:
        return queue.list_workers(s)


def allocation_ids(output: str) -> list[str]:
    assert "submitted" in output, output
    return output.split(":", 1)[1].split("(")[0].split()


def test_worker_allocations_claim_and_finish_queued_jobs_exactly_once(cluster, platform):
    home, url, env = platform
    ids = [submit(url, stage="sleep", overrides=["stage.seconds=1"], seed=i) for i in range(4)]
    out = ptmlab(
        env,
        "slurm",
        "workers",
        "--nodes",
        "2",
        "--partition",
        PARTITION,
        "--time",
        "10:00",
        "--burst",
        "--grace-s",
        "5",
    )
    assert out.returncode == 0, out.stderr
    slurm_ids = allocation_ids(out.stdout)
    assert len(slurm_ids) == 2

    wait_until(lambda: all(job(url, j).status == SUCCEEDED for j in ids), 120, "the four jobs to succeed")
    for j in ids:
        rows = attempts(url, j)
        assert [a.status for a in rows] == [SUCCEEDED], (j, [(a.status, a.error) for a in rows])
    registered = [w for w in workers(url) if w.slurm_job_id]
    assert {w.slurm_job_id for w in registered} == set(slurm_ids)
    assert {w.hostname for w in registered} <= {os.uname().nodename}
    assert {w.slurm_node for w in registered} <= set(NODES)
    assert all(w.ends_at is not None for w in registered)  # the allocation's time limit, from squeue
    # The dashboard's workers table shows each allocation's Slurm job, node and time left.
    from ptmlab.views.overview import slurm_label

    labels = [slurm_label(w) for w in registered]
    assert labels and all(re.fullmatch(r"job \d+ on ptmlab-n[12], (\d+ h )?\d+ min left", x) for x in labels), labels
    # Every job ran in one of the allocations (its attempt names a worker that registered with a Slurm id).
    by_worker = {w.id: w.slurm_job_id for w in registered}
    assert all(attempts(url, j)[0].worker_id in by_worker for j in ids)
    # --burst: the allocations end when the queue is empty, and the cluster is idle again.
    wait_until(lambda: not cluster.run("squeue", "-h").stdout.strip(), 60, "the allocations to end")
    logs = sorted((home / "slurm").glob("worker-*.log"))
    assert len(logs) == 2 and all("slurm job" in p.read_text() for p in logs)


def test_scancel_of_an_allocation_mid_job_requeues_it_and_another_allocation_finishes_it(cluster, platform):
    home, url, env = platform
    j = submit(url, stage="sleep", overrides=["stage.seconds=6"])
    out = ptmlab(env, "slurm", "workers", "--time", "10:00", "--grace-s", "0")
    assert out.returncode == 0, out.stderr
    [first] = allocation_ids(out.stdout)
    run_dir = wait_until(lambda: job(url, j).status == RUNNING and job(url, j).run_dir, 60, "the job to start")
    progress = Path(run_dir) / "sleep_progress.json"
    wait_until(
        lambda: progress.exists() and json.loads(progress.read_text())["slept_s"] >= 1.0, 60, "the job to make progress"
    )
    status = ptmlab(env, "slurm", "status")
    assert status.returncode == 0 and first in status.stdout and "RUNNING" in status.stdout, status.stdout

    cancelled = cluster.run("scancel", first)  # what an admin or a pre-emption does: not ptmlab's own stop
    assert cancelled.returncode == 0, cancelled.stderr
    wait_until(lambda: job(url, j).status == QUEUED, 60, "the job to be handed back to the queue")
    assert [a.status for a in attempts(url, j)] == [REQUEUED]
    assert job(url, j).resume

    out = ptmlab(env, "slurm", "workers", "--time", "10:00", "--burst")
    assert out.returncode == 0, out.stderr
    [second] = allocation_ids(out.stdout)
    wait_until(lambda: job(url, j).status == SUCCEEDED, 90, "another allocation to finish the job")
    rows = attempts(url, j)
    assert [a.status for a in rows] == [REQUEUED, SUCCEEDED]
    worker_slurm = {w.id: w.slurm_job_id for w in workers(url)}
    assert [worker_slurm[a.worker_id] for a in rows] == [first, second]
    summary = json.loads((Path(job(url, j).run_dir) / "summary.json").read_text())
    assert summary["resumed_from_s"] >= 1.0  # continued from its progress, not from zero


@pytest.mark.parametrize(
    "args, message",
    [
        (["--partition", "no_such_partition"], "invalid partition"),
        (["--cpus", "64"], "Requested node configuration is not available"),
    ],
)
def test_a_request_the_cluster_cannot_run_is_refused_with_slurms_message(cluster, platform, args, message):
    _, _, env = platform
    out = ptmlab(env, "slurm", "workers", "--nodes", "2", *args)
    assert out.returncode == 2
    assert message.lower() in out.stderr.lower() and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not cluster.run("squeue", "-h").stdout.strip()  # nothing was submitted


def test_dry_run_prints_the_batch_script(platform):  # needs no cluster, but the platform fixture starts one
    _, _, env = platform
    out = ptmlab(
        env, "slurm", "workers", "--dry-run", "--gpus-per-node", "4", "--partition", "gpu", "--time", "2:00:00"
    )
    assert out.returncode == 0, out.stderr
    script = out.stdout
    assert script.startswith("#!/bin/bash\n")
    for line in (
        "#SBATCH --gpus-per-node=4",
        "#SBATCH --partition=gpu",
        "#SBATCH --time=2:00:00",
        "#SBATCH --signal=B:USR1@120",
    ):
        assert line in script
    assert "\nexec " in script and "worker" in script and "--gpus slurm" in script


@pytest.mark.slow
def test_a_two_node_job_runs_as_one_srun_step_with_both_ranks_in_sync(cluster, platform, tmp_path):
    """nodes=2: only the --multinode worker claims it and runs it through srun on both slurmd
    nodes; Lightning's DDP (gloo) takes its ranks from srun, both replicas end with the same
    weights, rank 0 alone writes the summary, and each task's output is kept beside the log."""
    import random

    home, url, env = platform
    rng = random.Random(0)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    words = "the a cat dog sat on mat ran far near house tree big small red blue".split()
    (corpus / "doc.txt").write_text(
        "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(5, 12))) for _ in range(400)) + "\n"
    )
    overrides = [
        "model=bert_tiny",
        "objective=mlm",
        "data=text_files",
        f"data.corpus.path={corpus}",
        "data.block_size=32",
        "data.batch_size=8",
        "tokenizer.vocab_size=90",
        "tokenizer.min_frequency=1",
        "trainer=ddp",
        "trainer.accelerator=cpu",
        "trainer.precision=32-true",
        "trainer.max_steps=4",
        "trainer.limit_val_batches=0",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
    ]
    j = submit(url, stage="pretrain", overrides=overrides, nodes=2)
    single = subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "worker", "--burst"], env=env, capture_output=True, text=True, timeout=120
    )
    assert single.returncode == 0 and job(url, j).status == QUEUED  # a single-host worker leaves it alone

    # The test cluster's node names are not in DNS: rank 0's address is given (on a real cluster
    # Lightning resolves the first node of SLURM_NODELIST).
    worker_env = {**env, "MASTER_ADDR": "127.0.0.1"}
    worker = subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "worker", "--multinode", "--burst", f"--srun-arg=--partition={PARTITION}"],
        env=worker_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert worker.returncode == 0, worker.stdout[-3000:] + worker.stderr[-3000:]
    done = job(url, j)
    logs = sorted(Path(attempts(url, j)[0].log_path).parent.glob("attempt-1-*-task-*.log"))
    detail = "\n".join(p.name + ":\n" + p.read_text()[-1500:] for p in logs)
    assert done.status == SUCCEEDED, (done.error, detail)
    assert [p.name for p in logs] == ["attempt-1-node-0-task-0.log", "attempt-1-node-1-task-1.log"]
    summary = json.loads((Path(done.run_dir) / "summary.json").read_text())
    assert summary["steps"] == 4
    assert len(summary["replica_weights"]) == 2 and summary["replica_weights"][0] == summary["replica_weights"][1]
    assert summary["throughput"]["world_size"] == 2

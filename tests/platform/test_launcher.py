"""`hydra/launcher=ptmlab`: a real `python -m ptmlab.run -m ...` process turns a multirun into ONE
queued sweep (straight into the database, or through a real API process with `api_url`), refuses
a sweep with a combination that does not compose before queueing anything, and with
`hydra.launcher.wait=true` follows real worker processes to the end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from api_server import LiveApi

ROOT = Path(__file__).resolve().parents[2]


def launch(
    tmp_path: Path, db_url: str | None, *overrides: str, env: dict | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    run_env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1", **(env or {})}
    if db_url:
        run_env["PTMLAB_DATABASE_URL"] = db_url
    return subprocess.run(
        [sys.executable, "-m", "ptmlab.run", "-m", "hydra/launcher=ptmlab", *overrides],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=run_env,
        timeout=timeout,
    )


def jobs_in(db_url: str):
    from ptmlab import queue
    from ptmlab.db import get_sessionmaker

    with get_sessionmaker(db_url)() as s:
        jobs, total = queue.list_jobs(s, limit=1000)
        return sorted(jobs, key=lambda j: j.id), total


def test_hydra_discovers_the_launcher():
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins
    from hydra.plugins.launcher import Launcher
    from hydra.plugins.sweeper import Sweeper

    assert "PtmlabLauncher" in [cls.__name__ for cls in Plugins.instance().discover(Launcher)]
    assert "PtmlabSweeper" in [cls.__name__ for cls in Plugins.instance().discover(Sweeper)]
    assert "ptmlab.yaml" in ConfigStore.instance().list("hydra/launcher")
    assert "ptmlab.yaml" in ConfigStore.instance().list("hydra/sweeper")
    # platform/hydra_plugins is a namespace package shared with other plugins: no __init__.py.
    assert not (ROOT / "platform" / "hydra_plugins" / "__init__.py").exists()


def test_impossible_combination_refuses_the_whole_sweep(tmp_path, db_url):
    proc = launch(tmp_path, db_url, "model=bert_tiny,gpt_tiny", "objective=mlm,clm")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error[config_error]: combination [model=bert_tiny objective=clm]: objective=clm")
    assert "model family 'encoder'" in lines[0]
    assert jobs_in(db_url)[1] == 0

    # An unknown option: Hydra's own sweeper refuses the batch before the launcher sees it.
    proc = launch(tmp_path, db_url, "model=bert_tiny,nope")
    assert proc.returncode != 0
    assert "Could not find 'model/nope'" in proc.stderr and "bert_tiny" in proc.stderr
    assert jobs_in(db_url)[1] == 0


def test_model_objective_grid_becomes_one_sweep(tmp_path, db_url):
    proc = launch(
        tmp_path,
        db_url,
        "model=bert_tiny,gpt_tiny",
        "objective=mlm,clm",
        "seed=1,2",
        "hydra.launcher.skip_invalid=true",
        "hydra.launcher.priority=5",
        "hydra.launcher.name=grid",
    )
    assert proc.returncode == 0, proc.stderr
    assert "skipping [model=bert_tiny objective=clm]" in proc.stdout
    assert "skipping [model=gpt_tiny objective=mlm]" in proc.stdout
    jobs, total = jobs_in(db_url)
    assert total == 4
    assert len({j.sweep_id for j in jobs}) == 1 and jobs[0].sweep_id is not None
    assert f"sweep {jobs[0].sweep_id}: 4 jobs queued" in proc.stdout
    assert [(j.overrides, j.seed) for j in jobs] == [
        (["model=bert_tiny", "objective=mlm"], 1),
        (["model=bert_tiny", "objective=mlm"], 2),
        (["model=gpt_tiny", "objective=clm"], 1),
        (["model=gpt_tiny", "objective=clm"], 2),
    ]
    assert {(j.status, j.priority, j.stage) for j in jobs} == {("queued", 5, "pretrain")}

    from ptmlab import queue
    from ptmlab.db import get_sessionmaker

    with get_sessionmaker(db_url)() as s:
        sweep = queue.get_sweep(s, jobs[0].sweep_id)
        assert (sweep.name, sweep.job_count) == ("grid", 4)
        assert sweep.spec["overrides"] == ["model=bert_tiny,gpt_tiny", "objective=mlm,clm", "seed=1,2"]


def test_the_sweeper_keeps_hydras_grammar_and_order():
    """The cross product of Hydra's basic sweeper, built on its public override parser: values in the
    order given, ranges expanded, a repeated key's last value kept, an interval refused by name."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from hydra_plugins.ptmlab_launcher.ptmlab_sweeper import cross_product

    parse = OverridesParser.create().parse_overrides
    assert cross_product(parse(["a=1,2", "b=x", "c=range(0,2)", "b=y"])) == [
        ["a=1", "b=y", "c=0"],
        ["a=1", "b=y", "c=1"],
        ["a=2", "b=y", "c=0"],
        ["a=2", "b=y", "c=1"],
    ]
    assert cross_product(parse([])) == [[]]  # no override: one job
    with pytest.raises(HydraException, match="does not support sweep type: INTERVAL"):
        cross_product(parse(["lr=interval(0.1,1.0)"]))


def test_default_sweeper_composes_each_distinct_config_once(tmp_path):
    """hydra/sweeper=ptmlab is the default (conf/config.yaml): no override needed."""
    from hydra_plugins.ptmlab_launcher.ptmlab_sweeper import distinct_by_config

    batch = [["model=a", "seed=0"], ["model=a", "seed=1"], ["model=b", "seed=0"], ["seed=2", "model=b"]]
    assert distinct_by_config(batch) == [["model=a", "seed=0"], ["model=b", "seed=0"]]
    # the one seed key (contracts.identity.overrides_but_seed, also the API's sweep check): spaces
    # around `seed` as Hydra reads them; `+seed=` is an addition, not the seed override
    spaced = [["model=a", " seed =0"], ["model=a", "seed=1"], ["model=a", "+seed=1"]]
    assert distinct_by_config(spaced) == [["model=a", " seed =0"], ["model=a", "+seed=1"]]

    db_url = f"sqlite:///{tmp_path / 'platform.db'}"
    proc = launch(tmp_path, db_url, "stage=sleep", "stage.seconds=0.1,0.2", "seed=range(0,150)")
    assert proc.returncode == 0, proc.stderr
    jobs, total = jobs_in(db_url)
    assert total == 300 and len({j.sweep_id for j in jobs}) == 1
    assert {(j.overrides[0], j.seed) for j in jobs} == {
        (f"stage.seconds={s}", n) for s in ("0.1", "0.2") for n in range(150)
    }
    # It still refuses a combination that does not compose, before anything is queued.
    proc = launch(tmp_path, db_url, "stage=sleep", "stage.nope=1,2", "seed=range(0,3)")
    assert proc.returncode != 0 and "nope" in proc.stderr
    assert jobs_in(db_url)[1] == 300


@pytest.mark.slow
def test_wait_follows_real_workers_and_fails_when_a_job_fails(tmp_path, spawn_worker):
    db_url = f"sqlite:///{tmp_path / 'platform.db'}"
    home = tmp_path / "home"
    home.mkdir()
    spawn_worker(db_url, home, "--cpu-slots", "2")
    proc = launch(
        tmp_path,
        db_url,
        "stage=sleep",
        "stage.seconds=0.05",
        "stage.exit_code=0,3",
        "seed=range(0,2)",
        "hydra.launcher.wait=true",
        "hydra.launcher.poll_s=0.2",
        "hydra.launcher.max_attempts=1",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "4/4 finished: 2 failed, 2 succeeded" in proc.stdout
    jobs, _ = jobs_in(db_url)
    failed = [j for j in jobs if j.status == "failed"]
    assert [j.overrides for j in failed] == [["stage.seconds=0.05", "stage.exit_code=3"]] * 2
    for j in failed:
        assert (
            f"job {j.id} [stage=sleep stage.seconds=0.05 stage.exit_code=3 seed={j.seed}] ended failed" in proc.stderr
        )

    from ptmlab.db import Result, get_sessionmaker

    with get_sessionmaker(db_url)() as s:
        rows = s.query(Result).filter(Result.sweep_id == jobs[0].sweep_id).all()
        assert sorted(r.job_id for r in rows) == sorted(j.id for j in jobs if j.status == "succeeded")


@pytest.mark.slow
def test_api_url_sends_the_sweep_through_the_api(tmp_path):
    from ptmlab.db import dispose_engines

    db_url = f"sqlite:///{tmp_path / 'platform.db'}"
    api = LiveApi(db_url, tmp_path / "home", tmp_path, token="s3cret")
    api.start()
    try:
        url = f"hydra.launcher.api_url={api.base}"
        proc = launch(tmp_path, None, "stage=sleep", "seed=range(0,3)", url, env={"PTMLAB_API_TOKEN": "s3cret"})
        assert proc.returncode == 0, proc.stderr
        assert f"3 jobs queued in {api.base}" in proc.stdout
        jobs, total = jobs_in(db_url)
        assert total == 3 and len({j.sweep_id for j in jobs}) == 1
        assert sorted(j.seed for j in jobs) == [0, 1, 2]

        proc = launch(tmp_path, None, "stage=sleep", "seed=range(0,3)", url, env={"PTMLAB_API_TOKEN": ""})
        assert proc.returncode == 2 and "401" in proc.stderr, proc.stderr

        # Composes locally, but a remote caller may not point a job at a file outside the allowed roots.
        proc = launch(
            tmp_path,
            None,
            "stage=sleep",
            "+stage.corpus=/etc/passwd,/etc/shadow",
            url,
            env={"PTMLAB_API_TOKEN": "s3cret"},
        )
        assert proc.returncode == 2, proc.stderr
        assert "422" in proc.stderr and "outside the allowed roots" in proc.stderr
        assert jobs_in(db_url)[1] == 3
    finally:
        api.kill()
        dispose_engines()

"""Hostile submissions (issue 9): no code selection through any way in, no 5xx from any override,
bounded work per request. The first four tests are the reproductions that failed before:
`stage.entry=os.system` queued (201), `~model` a 500, `seed=range(0,100000000)` growing the API
past 9 GB, `model.backbone.hidden_size=abc` queued."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_api import API, client, make_client
from waiting import wait_until

from ptmlab import queue
from ptmlab.config import CONF_DIR
from ptmlab.db import session_scope

# -- the four reproductions -----------------------------------------------------------------


def test_stage_entry_is_refused_for_jobs_sweeps_pipelines_and_the_launcher(client):
    bad = "stage.entry=os.system"
    r = client.post(f"{API}/jobs", json={"stage": "pretrain", "overrides": [bad]})
    assert r.status_code == 422 and r.json()["error"]["code"] == "forbidden_override", r.text
    assert "entry" in r.json()["error"]["message"]
    spec = {"name": "p", "jobs": [{"name": "a", "stage": "pretrain", "overrides": [bad]}]}
    assert client.post(f"{API}/pipelines", json={"spec": spec, "dry_run": True}).status_code == 422
    in_defaults = {"name": "p", "defaults": {"overrides": [bad]}, "jobs": [{"name": "a", "stage": "sleep"}]}
    assert client.post(f"{API}/pipelines", json={"spec": in_defaults, "dry_run": True}).status_code == 422
    by_var = {
        "name": "p",
        "vars": {"k": ["entry"]},
        "jobs": [{"name": "a-{k}", "stage": "sleep", "overrides": ["stage.{k}=os.system"]}],
    }
    assert client.post(f"{API}/pipelines", json={"spec": by_var, "dry_run": True}).status_code == 422
    assert (
        client.post(f"{API}/pipelines", json={"name": "demo", "overrides": [bad], "dry_run": True}).status_code == 422
    )
    assert client.post(f"{API}/sweeps", json={"overrides": [bad, "seed=1,2"], "dry_run": True}).status_code == 422
    # what `hydra/launcher=ptmlab` sends: the sweep already expanded
    assert client.post(f"{API}/sweeps", json={"jobs": [["stage=sleep"], ["stage=sleep", bad]]}).status_code == 422
    assert client.post(f"{API}/jobs", json={"overrides": ["optimizer._partial_=true"]}).status_code == 422
    assert client.get(f"{API}/jobs").json()["total"] == 0


@pytest.mark.parametrize("override", ["~model", "~stage", "~model.backbone", "~task", "~optimizer"])
def test_deleting_a_node_that_selects_code_is_a_422_not_a_500(client, override):
    r = client.post(f"{API}/jobs", json={"overrides": [override]})
    assert r.status_code == 422, r.text
    assert "selects code" in r.json()["error"]["message"]


def test_a_preflight_no_stage_config_names_is_refused_before_it_is_imported(tmp_path):
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", "stage=sleep", "+stage.preflight=os.abort"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error[")]
    assert len(errors) == 1 and "stage.preflight='os.abort' is not a preflight of conf/stage/" in errors[0], errors


def test_deleting_model_locally_is_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", "~model"], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "model" in proc.stderr, proc.stderr


def test_a_billion_job_sweep_is_refused_before_listing_naming_the_count(client):
    # No timing asserted (shared machines): refusing before listing is what keeps memory flat, and
    # test_api_memory_stays_flat_under_the_worst_requests measures that.
    r = client.post(f"{API}/sweeps", json={"overrides": ["stage=sleep", "seed=range(0,100000000)"], "dry_run": True})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "limit_exceeded"
    assert "100,000,000" in r.json()["error"]["message"]
    for overrides in (
        ["seed=range(0,1e12)"],
        ["seed=range(0,100000)", "stage.seconds=1,2"],
        ["a=range(0,1,0)"],
        ["seed=range(0,3)", "+x=range(0,10000)"],
    ):
        r = client.post(f"{API}/sweeps", json={"overrides": ["stage=sleep", *overrides], "dry_run": True})
        assert r.status_code == 422, (overrides, r.text)
    huge_vars = {
        "name": "p",
        "vars": {"a": [str(i) for i in range(3000)], "b": [str(i) for i in range(3000)]},
        "jobs": [{"name": "j-{a}-{b}", "stage": "sleep", "overrides": ["+tags.a={a}", "+tags.b={b}"]}],
    }
    r = client.post(f"{API}/pipelines", json={"spec": huge_vars, "dry_run": True})
    assert r.status_code == 422 and "9,000,000" in r.json()["error"]["message"], r.text


def test_a_wrong_type_is_refused_before_queueing(client):
    r = client.post(f"{API}/jobs", json={"overrides": ["model.backbone.hidden_size=abc"]})
    assert r.status_code == 422, r.text
    assert "model.backbone.hidden_size" in r.json()["error"]["message"]
    assert client.get(f"{API}/jobs").json()["total"] == 0


# -- every code-selecting key found in conf/ is refused, in every form --------------------------

_RESERVED = re.compile(r"^_[A-Za-z]+_$")


def _conf_code_paths() -> set[str]:
    """Walked here independently of ptmlab.code_keys: every `_x_` key and every key whose value is
    a dotted path into an importable package, at its composed location."""
    found: set[str] = set()

    def walk(node, prefix):
        if isinstance(node, dict):
            for k, v in node.items():
                path = f"{prefix}.{k}" if prefix else str(k)
                dotted = isinstance(v, str) and re.match(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$", v)
                if _RESERVED.match(str(k)) or (dotted and importlib.util.find_spec(v.split(".")[0])):
                    found.add(path)
                walk(v, path)
        elif isinstance(node, list):
            for v in node:
                walk(v, prefix)

    for path in CONF_DIR.rglob("*.yaml"):
        rel = path.relative_to(CONF_DIR)
        if rel.parts[0] == "pipeline":
            continue
        text = path.read_text()
        data = yaml.safe_load(text) or {}
        data = {k: v for k, v in data.items() if k not in ("defaults", "hydra")}
        package = "" if "@package _global_" in text or len(rel.parts) == 1 else rel.parts[0]
        walk(data, package)
    return found


CODE_PATHS = sorted(_conf_code_paths())


def test_the_walk_finds_the_keys_that_matter():
    assert {"stage.entry", "model.backbone._target_", "optimizer._partial_", "task.data._target_"} <= set(CODE_PATHS)


@pytest.mark.parametrize("path", CODE_PATHS)
def test_every_code_key_in_conf_is_refused_in_every_form(client, path):
    key = path.rsplit(".", 1)[-1]
    forms = [
        f"{path}=x.y",
        f"+{path}=x.y",
        f"++{path}=x.y",
        f"~{path}",
        f"{path}=[a,b]",
        f"+deeper.{path}=1",
        f"+tags.any.{key}=1",
        f"++{path}={{a:1}}",
    ]
    parent = path.rsplit(".", 1)[0] if "." in path else None
    if parent and parent not in (
        "model",
        "stage",
        "task",
        "objective",
        "optimizer",
        "scheduler",
        "trainer",
        "adaptation",
        "data",
    ):
        forms.append(f"{parent}={{{key}: os.system}}")  # replacing the node that holds it
    for override in forms:
        r = client.post(f"{API}/jobs", json={"stage": "sleep", "overrides": [override]})
        assert r.status_code == 422 and r.json()["error"]["code"] == "forbidden_override", (override, r.text)
    sweep = client.post(f"{API}/sweeps", json={"overrides": ["stage=sleep", f"{path}=a.b,c.d"], "dry_run": True})
    assert sweep.status_code == 422, sweep.text


def test_choosing_a_registered_option_is_still_fine(client):
    for overrides in (
        ["stage=sleep"],
        ["stage=sleep", "model=gpt_tiny", "objective=clm", "tokenizer=bpe"],
        ["stage=sleep", "+tags.note=entry"],
        ["stage=sleep", "+tags.note=my_args_x"],
    ):
        r = client.post(f"{API}/jobs", json={"overrides": overrides})
        assert r.status_code == 201, (overrides, r.text)


def test_a_worker_never_imports_a_callable_named_by_a_jobs_overrides(tmp_path, spawn_worker):
    """Rows put straight into the queue (no API): the worker fails them before starting anything,
    and `python -m ptmlab.run` itself imports only the stage functions conf/stage names."""
    home = tmp_path / "home"
    home.mkdir()
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    marker = tmp_path / "imported"
    (plugin / "evil_stage.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n"
        "def run(cfg):\n    Path(" + repr(str(marker)) + ").write_text('called')\n"
        "class Model:\n    def __init__(self, *a, **k):\n        run(None)\n"
    )
    url = f"sqlite:///{tmp_path / 'platform.db'}"
    bad = [
        ["stage.entry=evil_stage.run"],
        ["model.backbone._target_=evil_stage.Model"],
        ["+optimizer._args_=[1]"],
        ["~model"],
    ]
    with session_scope(url) as s:
        ids = [queue.submit_job(s, stage="sleep", overrides=o, max_attempts=1).id for o in bad]
        good = queue.submit_job(s, stage="sleep", overrides=["stage.seconds=0.1"]).id
    os.environ["PYTHONPATH"] = f"{plugin}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    try:
        spawn_worker(url, home)
    finally:
        os.environ["PYTHONPATH"] = os.environ["PYTHONPATH"].split(os.pathsep, 1)[1]

    def finished():
        with session_scope(url) as s:
            jobs = [queue.get_job(s, i) for i in [*ids, good]]
            return all(j.status in ("succeeded", "failed") for j in jobs) and jobs

    jobs = wait_until(finished, 60, "every job to finish")
    assert [j.status for j in jobs] == ["failed"] * len(bad) + ["succeeded"]
    for job in jobs[:-1]:
        assert "refused before start" in job.error and "selects code" in job.error, job.error
    assert not marker.exists()
    # and the entry point alone, run by hand with the same override
    env = {**os.environ, "PTMLAB_HOME": str(home), "PYTHONPATH": str(plugin)}
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", "stage=sleep", "stage.entry=evil_stage.run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2 and "stage.entry" in proc.stderr, proc.stderr
    assert not marker.exists()


# -- secrets and exposure ------------------------------------------------------------------------


def test_serve_refuses_a_public_address_without_a_token(tmp_path):
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path)}
    env.pop("PTMLAB_API_TOKEN", None)
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "serve", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "0.0.0.0" in proc.stderr and "PTMLAB_API_TOKEN" in proc.stderr and "--insecure" in proc.stderr
    from ptmlab.cli.api_cmds import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.1.2.3")


def test_logs_job_errors_and_health_never_show_passwords_or_the_token(tmp_path, spawn_worker, monkeypatch):
    from ptmlab.settings import get_settings

    token = "tok-" + "s3cr3t" * 4
    monkeypatch.setenv("PTMLAB_API_TOKEN", token)  # as `ptmlab serve` reads it
    get_settings.cache_clear()
    url = f"sqlite:///{tmp_path / 'platform.db'}"
    home = tmp_path / "home"
    with make_client(tmp_path, url, api_token=token) as c:
        headers = {"Authorization": f"Bearer {token}"}
        job = c.post(f"{API}/jobs", json={"stage": "sleep", "overrides": ["stage.seconds=0.1"]}, headers=headers).json()
        spawn_worker(url, home)
        wait_until(lambda: c.get(f"{API}/jobs/{job['id']}").json()["status"] == "succeeded", 60, "the job")
        log_path = Path(c.get(f"{API}/jobs/{job['id']}/logs").json()["path"])
        with open(log_path, "a") as f:
            f.write(f"connecting to postgresql+psycopg://ptmlab:hunter2@db:5432/ptmlab with {token}\n")
        with session_scope(url) as s:
            queue.get_job(s, job["id"]).error = "could not reach postgresql://u:hunter2@h/db"
        for route in (
            f"{API}/jobs/{job['id']}/logs",
            f"{API}/jobs/{job['id']}/logs?tail=5",
            f"{API}/jobs/{job['id']}",
            f"{API}/jobs/{job['id']}/attempts",
            f"/jobs/{job['id']}",
        ):
            text = c.get(route).text
            assert "hunter2" not in text and token not in text, (route, text[-300:])
        assert "ptmlab:***@db" in c.get(f"{API}/jobs/{job['id']}/logs").text
    get_settings.cache_clear()


# -- bounded work per request ------------------------------------------------------------------


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def worst_requests() -> list[tuple[str, dict]]:
    """The most expensive requests that fit the stated limits (and a few that do not)."""
    many_values = ",".join(str(i) for i in range(480))  # just under 2,000 characters: ~480^3 jobs below
    long_override = "+tags.x=" + "v" * 1990
    nested = "+tags.x=" + "[" * 900 + "]" * 900
    return [
        ("/sweeps", {"overrides": ["stage=sleep", "seed=range(0,1000000000)"], "dry_run": True}),
        ("/sweeps", {"overrides": ["stage=sleep", "seed=range(0,1e15,0.5)"], "dry_run": True}),
        (
            "/sweeps",
            {
                "overrides": ["stage=sleep", f"seed={many_values}", f"+tags.a={many_values}", f"+tags.b={many_values}"],
                "dry_run": True,
            },
        ),
        (
            "/sweeps",
            {
                "overrides": ["stage=sleep", "seed=range(0,100)", "stage.seconds=range(0,100)", "+tags.a=range(0,100)"],
                "dry_run": True,
            },
        ),
        ("/sweeps", {"jobs": [["stage=sleep", f"seed={i}"] for i in range(9000)], "dry_run": True}),
        ("/jobs", {"stage": "sleep", "overrides": [long_override] * 100}),
        ("/jobs", {"stage": "sleep", "overrides": [nested]}),
        ("/jobs", {"stage": "sleep", "overrides": ["+" + "k" * 1999 + "=1"]}),
        (
            "/pipelines",
            {
                "spec": {
                    "name": "p",
                    "vars": {"a": [str(i) for i in range(5000)], "b": [str(i) for i in range(5000)]},
                    "jobs": [{"name": "j{a}{b}", "stage": "sleep"}],
                },
                "dry_run": True,
            },
        ),
        ("/jobs", {"stage": "sleep", "overrides": ["x" * 10] * 100_000}),  # over the body limit: 413
    ]


def test_api_memory_stays_flat_under_the_worst_requests(tmp_path):
    import httpx
    from api_server import LiveApi

    api = LiveApi(f"sqlite:///{tmp_path / 'platform.db'}", tmp_path / "home", tmp_path)
    api.start()
    try:
        with httpx.Client(base_url=api.base + API, timeout=120) as http:
            # warm up: Hydra, the config catalogue, one composed job of each stage
            for stage in ("sleep", "pretrain", "finetune"):
                http.post(
                    "/jobs", json={"stage": stage, "overrides": ["task=glue/sst2"] if stage == "finetune" else []}
                )
            http.post("/sweeps", json={"overrides": ["stage=sleep", "seed=range(0,3)"], "dry_run": True})
            before = _rss_mb(api.proc.pid)
            statuses = []
            for _round in range(3):
                for route, body in worst_requests():
                    r = http.post(route, json=body)
                    statuses.append((route, r.status_code))
                    assert r.status_code < 500, (route, r.text[:300])
            after = _rss_mb(api.proc.pid)
    finally:
        api.kill()
    assert {s for _, s in statuses} <= {200, 201, 413, 422}, statuses
    assert after - before < 50, f"API RSS grew {after - before:.1f} MB ({before:.0f} -> {after:.0f} MB)"

"""Issue 41, defect 8: secrets in overrides, errors, configs and logs are never served or logged.

One redaction (ptmlab.contracts.secrets, wrapped with the API token by ptmlab.settings.redact)
covers URL user-info with any characters, empty user names, keyword forms and DSNs; it is applied
where a job is serialised (the job and attempts JSON, the job page, the CLI), to the views that
show a job's config or overrides, to the log routes (no offset can slice a secret open), the job
log's header and the database URL shown at start-up. The stored job row keeps the real value: the
worker needs it.

The secrets below are spelt with upper-case letters (QZXWVKJ) that appear nowhere else in what
these tests serve, so "nothing of a secret shows" is "no run of those letters shows" (`leaked`).
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from ptmlab import queue
from ptmlab.api.app import create_app
from ptmlab.db import dispose_engines, session_scope
from ptmlab.db.models import Attempt, Job, Result
from ptmlab.settings import Settings, redact

API = "/api/v1"
SECRET = "QZX/WV@KJQ"  # a password holding `/` and an unencoded `@`
URL = f"http://alice:{SECRET}@tracker.example/x"
OVERRIDE = f"+stage.message={URL}"


def leaked(text: str, run: int = 2) -> list[str]:
    """The fragments of a secret in `text`: runs of `run` or more of the letters the secrets are
    spelt with (one letter on its own is a pages' or a timestamp's `Z`; the logs here are all
    lower-case, so they are checked letter by letter)."""
    return re.findall(f"[QZXWVKJ]{{{run},}}", text)


@pytest.fixture()
def client(ptmlab_home, tmp_path):
    settings = Settings(home=ptmlab_home, data_dir=tmp_path / "data")
    with TestClient(create_app(settings)) as c:
        c.url = settings.resolved_database_url
        yield c
    dispose_engines()


def _job_with_attempt(url: str, log: Path, *, log_text: str, finished: bool = True) -> int:
    """A job queued straight through the queue (no API validation) with one attempt and its log."""
    log.write_text(log_text)
    with session_scope(url) as s:
        job = queue.submit_job(s, stage="sleep", overrides=[OVERRIDE, "stage.seconds=0.1"])
        job.error = f"failed to reach {URL}"
        now = dt.datetime(2026, 1, 1)
        s.add(
            Attempt(
                job_id=job.id,
                number=1,
                worker_id="w-1",
                status="failed" if finished else "running",
                argv=["stage=sleep", OVERRIDE],
                log_path=str(log),
                error=f"cannot open {URL}",
                started_at=now,
                finished_at=now if finished else None,
            )
        )
        s.commit()
        return job.id


def test_a_password_in_an_override_is_not_served_by_the_job_routes_or_pages(client, tmp_path):
    job_id = _job_with_attempt(client.url, tmp_path / "a.log", log_text="hello\n")
    served = {
        "job": client.get(f"{API}/jobs/{job_id}"),
        "jobs": client.get(f"{API}/jobs"),
        "attempts": client.get(f"{API}/jobs/{job_id}/attempts"),
        "job page": client.get(f"/jobs/{job_id}"),
        "job view (composed config)": client.get(f"{API}/views/jobs/{job_id}"),
        "overview page": client.get("/"),
        "overview view": client.get(f"{API}/views/overview"),
    }
    for name, response in served.items():
        assert response.status_code == 200, (name, response.text[:300])
        assert not leaked(response.text), (name, leaked(response.text))
    job = served["job"].json()
    assert "+stage.message=http://alice:***@tracker.example/x" in job["overrides"]
    assert job["error"] == "failed to reach http://alice:***@tracker.example/x"
    assert served["attempts"].json()[0]["argv"] == ["stage=sleep", "+stage.message=http://alice:***@tracker.example/x"]
    assert (
        served["job view (composed config)"].json()["config"]["stage"]["message"]
        == "http://alice:***@tracker.example/x"
    )
    with session_scope(client.url) as s:  # the row keeps the real value: the worker runs it
        assert OVERRIDE in s.get(Job, job_id).overrides


def test_a_sweeps_route_and_page_do_not_show_the_password_it_varies(client):
    with session_scope(client.url) as s:
        sweep, _ = queue.submit_sweep(
            s,
            [{"stage": "sleep", "overrides": [OVERRIDE.replace("tracker", host)]} for host in ("one", "two")],
            spec={"overrides": [OVERRIDE]},
        )
    for route in (f"{API}/sweeps/{sweep.id}", f"/sweeps/{sweep.id}"):
        r = client.get(route)
        assert r.status_code == 200 and "alice:***@one.example" in r.text, (route, r.text[-500:])
        assert not leaked(r.text), (route, leaked(r.text))


def test_the_compare_view_does_not_show_a_password_of_the_job_overrides(client, tmp_path):
    job_id = _job_with_attempt(client.url, tmp_path / "a.log", log_text="")
    with session_scope(client.url) as s:
        result = Result(job_id=job_id, kind="sleep", summary={"stage": "sleep", "seconds": 0.1}, tags={})
        s.add(result)
        s.commit()
        result_id = result.id
    r = client.get(f"{API}/views/compare", params={"jobs": str(job_id)})
    assert r.status_code == 200, r.text
    assert not leaked(r.text), r.text
    assert r.json()["configs"][str(result_id)]["stage.message"] == "http://alice:***@tracker.example/x"


def test_a_run_folders_hydra_config_is_served_redacted(client, tmp_path):
    """Hydra's own copy (.hydra/config.yaml) is written by Hydra, not the stage: it keeps the password."""
    job_id = _job_with_attempt(client.url, tmp_path / "a.log", log_text="")
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "config.yaml").write_text(f"stage:\n  name: sleep\n  message: {URL}\ndb:\n  password: QQZZ\n")
    with session_scope(client.url) as s:
        s.get(Job, job_id).run_dir = str(run_dir)
        s.commit()
    view = client.get(f"{API}/views/jobs/{job_id}").json()
    assert view["config_source"] == "run folder"
    assert view["config"]["stage"]["message"] == "http://alice:***@tracker.example/x"
    assert view["config"]["db"]["password"] == "***"


LOG = (
    "== job 1 attempt 1 on w-1\n"
    f"== python -m ptmlab.run stage=sleep {OVERRIDE}\n"
    "connecting to postgresql+psycopg://bob:ZQXW@db:5432/ptm\n"
    "export postgres_password=KJWVZ\n"
    "curl https://h.example/a?token=XWQJ&page=2\n"
    "dsn: host=db user=bob password='VW KJ' dbname=ptm\n"
    "done\n"
)


def test_no_log_offset_reveals_part_of_a_secret(client, tmp_path):
    job_id = _job_with_attempt(client.url, tmp_path / "a.log", log_text=LOG)
    size = len(LOG.encode())
    full = client.get(f"{API}/jobs/{job_id}/logs").json()
    assert full["size"] == size and full["offset"] == size and not leaked(full["text"], 1), full["text"]
    assert "postgresql+psycopg://bob:***@db:5432/ptm" in full["text"] and "done\n" in full["text"]
    for offset in range(size + 1):
        chunk = client.get(f"{API}/jobs/{job_id}/logs", params={"offset": offset}).json()
        assert not leaked(chunk["text"], 1), (offset, chunk["text"])
        assert chunk["offset"] == size
    # away from a secret an offset still reads exactly what follows it
    assert client.get(f"{API}/jobs/{job_id}/logs", params={"offset": size - 3}).json()["text"] == "ne\n"


def test_a_followed_log_never_shows_a_secret_that_is_still_being_written(client, tmp_path):
    log = tmp_path / "a.log"
    job_id = _job_with_attempt(client.url, log, log_text="start\nuri=http://alice:QZ", finished=False)
    first = client.get(f"{API}/jobs/{job_id}/logs").json()
    assert not leaked(first["text"], 1), first["text"]
    assert first["text"] == "start\n"
    with log.open("a") as f:
        f.write("XW@tracker.example/x\n")
    rest = client.get(f"{API}/jobs/{job_id}/logs", params={"offset": first["offset"]}).json()
    assert rest["text"] == "uri=http://alice:***@tracker.example/x\n"
    assert rest["offset"] == rest["size"]


def test_a_tail_window_starting_inside_a_secret_reveals_nothing(client, tmp_path):
    prefix = "db postgresql://bob:"
    secret_line = prefix + "QZXWVKJ" * 4 + "@db/ptm\n"
    # the 4,096-byte window read for a short tail starts 5 characters into the password
    rest = 4096 + len(prefix) + 5 - len(secret_line)
    fillers = ["x" * (n - 1) + "\n" for n in (rest // 3, rest // 3, rest - 2 * (rest // 3))]
    text = "y" * 99 + "\n" + secret_line + "".join(fillers)
    assert text.encode()[-4096:].startswith(b"KJQZ")
    job_id = _job_with_attempt(client.url, tmp_path / "a.log", log_text=text)
    tail = client.get(f"{API}/jobs/{job_id}/logs", params={"tail": 10}).json()
    assert not leaked(tail["text"], 1), tail["text"][:200]
    assert tail["text"] == "".join(fillers)


def test_the_cli_status_does_not_print_the_password(client, tmp_path, capsys):
    from ptmlab.cli import main

    job_id = _job_with_attempt(client.url, tmp_path / "a.log", log_text=LOG)
    for argv in (["status"], ["status", str(job_id)], ["logs", str(job_id)]):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 0
        out = capsys.readouterr().out
        assert "alice" in out and not leaked(out), (argv, out)


def test_the_job_log_header_does_not_hold_the_password(tmp_path):
    from ptmlab.worker.job_process import open_job_log

    claim = SimpleNamespace(
        run_dir=str(tmp_path / "run"), log_path=str(tmp_path / "run" / "attempt-1.log"), job_id=1, attempt_number=1
    )
    open_job_log(claim, ["python", "-m", "ptmlab.run", "stage=sleep", OVERRIDE], "w-1").close()
    header = Path(claim.log_path).read_text()
    assert "+stage.message=http://alice:***@tracker.example/x" in header and not leaked(header), header


@pytest.mark.parametrize(
    "text, shown",
    [
        # URL user-info: any character in the password, an empty user name, an unencoded `@`
        ("http://u:QZ/X@h/x", "http://u:***@h/x"),
        ("redis://:QZXW@cache:6379/0", "redis://:***@cache:6379/0"),
        ("postgresql://u:QZ@XW@db/ptm", "postgresql://u:***@db/ptm"),
        ("postgresql+psycopg://ptm:QZ%21X@db:5432/x", "postgresql+psycopg://ptm:***@db:5432/x"),
        ("['tracking.uri=https://u:QZ:XW#V@h/', 'seed=1']", "['tracking.uri=https://u:***@h/', 'seed=1']"),
        # keyword forms: query strings, env lines, YAML and JSON, libpq keyword DSNs
        ("https://h/a?token=QZXW&page=2", "https://h/a?token=***&page=2"),
        ("https://h/a?access_token=QZXW", "https://h/a?access_token=***"),
        ("POSTGRES_PASSWORD=QZ/XW@V", "POSTGRES_PASSWORD=***"),
        ("export PGPASSWORD=QZXW", "export PGPASSWORD=***"),
        ("HF_TOKEN=hf_QZXW", "HF_TOKEN=***"),
        ("PTMLAB_API_TOKEN=QZXW", "PTMLAB_API_TOKEN=***"),
        ("AWS_SECRET_ACCESS_KEY=QZ/XW+V", "AWS_SECRET_ACCESS_KEY=***"),
        ("passwd=QZXW", "passwd=***"),
        ("POSTGRES_PASSWORD=QZ,XW;V", "POSTGRES_PASSWORD=***"),
        ("db password: QZXW", "db password: ***"),
        ("{'api_token': 'QZ XW', 'token': None}", "{'api_token': '***', 'token': None}"),
        ("secret=QZXW", "secret=***"),
        ("api_key=QZXW", "api_key=***"),
        ("+db.password=QZXW", "+db.password=***"),
        ("  password: QZ XW V  # prod", "  password: ***"),
        ("client_secret: 'QZ XW'", "client_secret: '***'"),
        ('{"password": "QZ \\" XW", "user": "bob"}', '{"password": "***", "user": "bob"}'),
        ("host=db user=bob password=QZXW dbname=ptm", "host=db user=bob password=*** dbname=ptm"),
        ("host=db password = 'QZ \\' XW' port=5432", "host=db password = '***' port=5432"),
        ("Authorization: Bearer QZXWVKJQ", "Authorization: ***"),
        ("sent Bearer QZXWVKJQZX to the server", "sent Bearer *** to the server"),
    ],
)
def test_the_redaction_covers_every_form(text, shown):
    assert redact(text, Settings(api_token=None)) == shown


@pytest.mark.parametrize(
    "text",
    [
        "tokenizer=wordpiece data.max_tokens=128 stage.token.epochs=2 mask_token_prob: 0.15",
        "pad_token: '[PAD]'",
        "token:                      # token and sentence probes",
        "password_file=/run/secrets/db",
        "sqlite:////home/me/.ptmlab/ptmlab.db",
        "user:pw plain",
        "http://host:8080/x?page=2",
        "postgresql://ptm@db/ptm",
        "password: null",
        "token:",
        "generation needs an end token: the tokenizer has neither eos nor [SEP] (tokenizer)",
        "probe=lama needs a tokenizer with a mask token: backbone=mlflow:abc has none",
    ],
)
def test_the_redaction_leaves_what_is_not_a_secret(text):
    assert redact(text, Settings(api_token=None)) == text


def test_the_api_token_is_redacted_and_redaction_is_idempotent():
    settings = Settings(api_token="tok-QZXW")
    once = redact("calling with tok-QZXW and http://u:QZ/X@h", settings)
    assert once == "calling with *** and http://u:***@h"
    assert redact(once, settings) == once


def test_the_config_a_stage_logs_uses_the_same_redaction():
    """lightning_modules/runtime/stage_run.py writes config.yaml and MLflow params through it."""
    from ptmlab.contracts.secrets import redact_url_passwords

    assert (
        redact_url_passwords(f"uri: {URL}\npassword: QZXW\n")
        == "uri: http://alice:***@tracker.example/x\npassword: ***\n"
    )


def test_an_unencoded_at_in_the_database_password_is_refused_without_its_tail(tmp_path):
    from ptmlab.doctor import check_database
    from ptmlab.errors import ConfigError

    url = "postgresql://bob:pw@QZXW@127.0.0.1:1/ptm"
    with pytest.raises(ConfigError) as refused:
        create_app(Settings(home=tmp_path / "home", database_url=url))
    message = str(refused.value)
    assert "PTMLAB_DATABASE_URL" in message and "%40" in message and "\n" not in message
    assert not leaked(message), message
    check = check_database(Settings(home=tmp_path / "home", database_url=url))
    assert check.ok is False and not leaked(f"{check}"), check

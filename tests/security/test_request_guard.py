"""The API only answers its own origin (issue 41, defects 4 and 9; "What to build" 3 and 7):
a `Host` allowlist against DNS rebinding, cross-site and non-JSON writes refused, security headers
on every answer, the token checked before the body is parsed (and on the reads that return logs,
predictions and configs when the API is bound beyond loopback), a token of spaces refused at
start-up, every failure a JSON body (507 for a full disk), slow clients dropped by `ptmlab serve`.

In-process (FastAPI's TestClient, whose requests carry `Host: testserver`: tests/conftest.py adds
that name to PTMLAB_API_ALLOWED_HOSTS), except the slow-client test, whose point is the server."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from api_server import free_port
from fastapi.testclient import TestClient
from pydantic import ValidationError

from ptmlab.api.app import create_app
from ptmlab.settings import Settings

API = "/api/v1"
REPO_ROOT = Path(__file__).resolve().parents[2]
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
EVIL = {"Origin": "http://evil.example", **FORM}


def make_client(tmp_path: Path, **settings) -> TestClient:
    s = Settings(
        home=tmp_path / "home",
        database_url=f"sqlite:///{tmp_path / 'platform.db'}",
        data_dir=tmp_path / "data",
        **settings,
    )
    # An unhandled error must come back as the client sees it, not re-raised into the test.
    return TestClient(create_app(s), raise_server_exceptions=False)


@pytest.fixture()
def client(tmp_path):
    from ptmlab.db import dispose_engines

    with make_client(tmp_path) as c:
        yield c
    dispose_engines()


def sleep_job(client: TestClient, headers: dict | None = None) -> dict:
    r = client.post(f"{API}/jobs", json={"stage": "sleep", "overrides": ["stage.seconds=0.1"]}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


def error_code(r) -> str:
    assert r.headers["content-type"].startswith("application/json"), (r.status_code, r.text[:200])
    return r.json()["error"]["code"]


# -- DNS rebinding: the Host header -------------------------------------------------------------


def test_a_foreign_host_is_refused_before_any_route_runs(client):
    rebound = {"Host": "attacker.example"}
    r = client.post(f"{API}/jobs", json={"stage": "sleep", "overrides": ["stage.seconds=0.1"]}, headers=rebound)
    assert r.status_code == 421 and error_code(r) == "host_not_allowed", r.text
    assert (
        "attacker.example" in r.json()["error"]["message"]
        and "PTMLAB_API_ALLOWED_HOSTS" in r.json()["error"]["message"]
    )
    assert client.get(f"{API}/jobs").json()["total"] == 0  # nothing was queued
    for path in ("/", f"{API}/jobs", "/healthz", "/static/js/api.js"):
        r = client.get(path, headers={"Host": "attacker.example:8765", "Accept": "text/html"})
        assert r.status_code == 421 and error_code(r) == "host_not_allowed", path
    for host in ("localhost", "localhost:8765", "127.0.0.1:8765", "[::1]:9000", "LOCALHOST:1", "testserver"):
        assert client.get(f"{API}/jobs", headers={"Host": host}).status_code == 200, host
    for host in ("localhost.attacker.example", "127.0.0.1.nip.io", "", "a b", "[::2]"):
        assert client.get(f"{API}/jobs", headers={"Host": host}).status_code in (400, 421), host


def test_the_bind_host_and_configured_public_names_are_allowed(tmp_path):
    from ptmlab.db import dispose_engines

    with make_client(tmp_path, bind_host="10.1.2.3", api_allowed_hosts="lab.example.org, ptm.internal") as c:
        for host in ("10.1.2.3:8765", "lab.example.org", "LAB.example.org:443", "ptm.internal:8765", "localhost"):
            assert c.get(f"{API}/jobs", headers={"Host": host}).status_code == 200, host
        for host in ("example.org", "10.1.2.4", "lab.example.org.attacker.example"):
            assert c.get(f"{API}/jobs", headers={"Host": host}).status_code == 421, host
        # A page served under a public name may write through the API under that name.
        job = sleep_job(c, headers={"Host": "lab.example.org"})
        r = c.post(
            f"{API}/jobs/{job['id']}/cancel", headers={"Host": "lab.example.org", "Origin": "https://lab.example.org"}
        )
        assert r.status_code == 200, r.text
    dispose_engines()


# -- cross-site writes ---------------------------------------------------------------------------


def test_a_cross_site_form_cannot_cancel_retry_or_stop(client):
    job = sleep_job(client)
    for action in ("cancel", "retry"):
        r = client.post(f"{API}/jobs/{job['id']}/{action}", content="x=1", headers=EVIL)
        assert r.status_code == 403 and error_code(r) == "cross_site_request", (action, r.text)
    r = client.post(f"{API}/jobs/{job['id']}/cancel", headers={"Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403 and error_code(r) == "cross_site_request"
    # A sandboxed frame or a file: page sends `Origin: null`; another port of localhost is another origin.
    for origin in ("null", "http://localhost:3000", "http://testserver.evil.example"):
        r = client.post(
            f"{API}/jobs/{job['id']}/cancel",
            headers={"Origin": origin, "Content-Type": "application/json"},
            content="{}",
        )
        assert r.status_code == 403, origin
    r = client.patch(f"{API}/jobs/{job['id']}", json={"name": "pwned"}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    after = client.get(f"{API}/jobs/{job['id']}").json()
    assert after["status"] == "queued" and after["name"] != "pwned"

    study = client.post(
        f"{API}/studies",
        json={
            "stage": "sleep",
            "overrides": ["stage.validations=1", "stage.quality=interval(0.1,1)"],
            "objective": "val/score",
            "n_trials": 2,
            "n_parallel": 1,
        },
    )
    assert study.status_code in (200, 201), study.text
    sid = study.json()["id"]
    for action in ("stop", "resume"):
        r = client.post(f"{API}/studies/{sid}/{action}", content="", headers=EVIL)
        assert r.status_code == 403 and error_code(r) == "cross_site_request", (action, r.text)
    assert client.get(f"{API}/studies/{sid}").json()["status"] == "running"


def test_same_origin_pages_and_clients_without_origin_keep_working(client):
    job = sleep_job(client)
    same = {"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}
    r = client.patch(f"{API}/jobs/{job['id']}", json={"name": "renamed"}, headers=same)
    assert r.status_code == 200 and r.json()["name"] == "renamed", r.text
    # The dashboard's cancel and retry, and curl -X POST: no body, no Content-Type.
    assert client.post(f"{API}/jobs/{job['id']}/cancel", headers=same).status_code == 200
    assert client.post(f"{API}/jobs/{job['id']}/retry").status_code == 200
    r = client.post(
        f"{API}/jobs",
        content='{"stage": "sleep", "overrides": ["stage.seconds=0.1"]}',
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert r.status_code == 201, r.text


@pytest.mark.parametrize(
    "content_type",
    ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain", "application/jsonx", None],
)
def test_mutating_routes_take_json_bodies_only(client, content_type):
    job = sleep_job(client)
    headers = {"Content-Type": content_type} if content_type else {}
    body = '{"stage": "sleep"}'
    r = client.post(f"{API}/jobs/{job['id']}/cancel", content=body, headers=headers)
    assert r.status_code == 415 and error_code(r) == "unsupported_media_type", r.text
    assert "application/json" in r.json()["error"]["message"]
    assert client.get(f"{API}/jobs/{job['id']}").json()["status"] == "queued"


# -- headers on pages ----------------------------------------------------------------------------


def inline_handlers() -> set[str]:
    """Every inline event handler in the dashboard's templates (`onsubmit="return false"`)."""
    found = set()
    for template in (REPO_ROOT / "web" / "templates").glob("*.html"):
        found |= set(re.findall(r'\son[a-z]+="([^"]*)"', template.read_text()))
    return found


def test_pages_carry_csp_and_frame_headers(client):
    for path in ("/", "/jobs", "/compression", f"{API}/jobs", "/static/js/api.js", "/no-such-page"):
        r = client.get(path, headers={"Accept": "text/html"})
        assert r.headers.get("x-frame-options") == "DENY", path
        assert r.headers.get("x-content-type-options") == "nosniff", path
        assert r.headers.get("referrer-policy") == "same-origin", path
        csp = r.headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in csp, (path, csp)
    csp = dict(d.strip().split(" ", 1) for d in client.get("/jobs").headers["content-security-policy"].split(";"))
    assert "'unsafe-inline'" not in csp["script-src"] and "'unsafe-eval'" not in csp["script-src"]
    assert csp["object-src"] == "'none'" and csp["base-uri"] == "'none'" and csp["form-action"] == "'self'"
    # Each inline handler the templates use is allowed by its hash, and nothing else inline is.
    for handler in inline_handlers():
        digest = base64.b64encode(hashlib.sha256(handler.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp["script-src"], handler
    # The API docs (an inline script of FastAPI's) keep working, still never framed.
    docs = client.get("/docs").headers["content-security-policy"]
    assert "frame-ancestors 'none'" in docs


# -- authentication before the body --------------------------------------------------------------


def test_the_token_is_checked_before_the_body_is_parsed(tmp_path):
    from ptmlab.db import dispose_engines

    with make_client(tmp_path, api_token="s3cret") as c:
        for body in ("{not json", '{"stage": 5}', "[" * 5000):
            for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
                r = c.post(f"{API}/jobs", content=body, headers={"Content-Type": "application/json", **auth})
                assert r.status_code == 401 and error_code(r) == "unauthorized", (body[:10], auth, r.text)
                assert r.headers["www-authenticate"] == "Bearer"
        r = c.post(
            f"{API}/jobs",
            content="{not json",
            headers={"Content-Type": "application/json", "Authorization": "Bearer s3cret"},
        )
        assert r.status_code == 422
        # Before the content type too: a stranger learns nothing about what the route would take.
        assert c.post(f"{API}/jobs/1/cancel", content="x=1", headers=FORM).status_code == 401
    dispose_engines()


def test_a_token_of_spaces_is_a_settings_error_at_start_up(tmp_path):
    with pytest.raises(ValidationError, match="api_token"):
        Settings(home=tmp_path, api_token="  \t ")
    assert not Settings(home=tmp_path, api_token="").api_token  # empty still means "no token"
    # The real command: before the fix it served (on a port of the test's choosing) and never exited.
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path), "PTMLAB_API_TOKEN": "   "}
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "serve", "--port", str(free_port())],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    err = proc.stderr.strip()
    assert proc.returncode == 2 and "PTMLAB_API_TOKEN" in err and len(err.splitlines()) == 1, err


# -- reads that return logs, predictions, configs ------------------------------------------------

PROTECTED_READS = [
    "/jobs/{id}/logs",
    "/jobs/{id}/logs?tail=5",
    "/jobs/{id}/attempts",
    "/jobs/{id}/predictions",
    "/jobs/{id}/attack-records",
    "/views/jobs/{id}",
    "/views/compare?runs=1,2",
]
OPEN_READS = ["/jobs", "/jobs/{id}", "/jobs/{id}/progress", "/views/overview", "/workers", "/catalogue"]


def test_reads_of_logs_predictions_and_configs_need_the_token_beyond_loopback(tmp_path):
    from ptmlab.db import dispose_engines

    auth = {"Authorization": "Bearer s3cret"}
    with make_client(tmp_path, api_token="s3cret", bind_host="0.0.0.0") as c:
        job = sleep_job(c, headers=auth)
        for path in PROTECTED_READS:
            r = c.get(API + path.format(id=job["id"]))
            assert r.status_code == 401 and error_code(r) == "unauthorized", (path, r.text[:200])
            assert c.get(API + path.format(id=job["id"]), headers=auth).status_code != 401, path
        for path in OPEN_READS:  # what the dashboard's lists poll
            assert c.get(API + path.format(id=job["id"])).status_code == 200, path
        # Bound to every interface: reached by the machine's addresses and name, still not by another name.
        for host, status in (
            ("10.9.8.7:8765", 200),
            ("[fd00::5]", 200),
            (socket.gethostname(), 200),
            ("attacker.example", 421),
        ):
            assert c.get(f"{API}/jobs", headers={"Host": host}).status_code == status, host
    dispose_engines()
    for settings in (
        {"api_token": "s3cret", "bind_host": "0.0.0.0", "api_protect_reads": False},
        {"api_token": "s3cret"},
    ):  # on loopback: off unless asked for
        with make_client(tmp_path, **settings) as c:
            for path in PROTECTED_READS:
                assert c.get(API + path.format(id=job["id"])).status_code != 401, (settings, path)
        dispose_engines()
    with make_client(tmp_path, api_token="s3cret", api_protect_reads=True) as c:
        assert c.get(f"{API}/jobs/{job['id']}/logs").status_code == 401
    dispose_engines()


# -- every failure is JSON -----------------------------------------------------------------------


def test_an_unhandled_error_is_a_json_500_without_the_traceback(client, monkeypatch):
    from ptmlab.api.routes import workers

    def broken(_session):
        raise RuntimeError("boom: internal detail /srv/secret")

    monkeypatch.setattr(workers.queue, "list_workers", broken)
    r = client.get(f"{API}/workers")
    assert r.status_code == 500 and error_code(r) == "internal_error", r.text
    assert "Traceback" not in r.text and "/srv/secret" not in r.text


def sqlite_full_disk(url: str) -> None:
    """Every new connection to `url` may not grow the file: SQLite's own SQLITE_FULL
    ("database or disk is full"), as on a full disk."""
    from ptmlab.db import get_engine

    engine = get_engine(url)

    @sa.event.listens_for(engine, "connect")
    def _cap(dbapi_connection, _record):
        pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")

    engine.dispose()
    db = sqlite3.connect(sa.make_url(url).database)
    try:
        db.execute("VACUUM")  # no free pages left inside the file either
    finally:
        db.close()


def test_a_full_disk_is_a_json_507(tmp_path):
    from ptmlab.db import dispose_engines

    with make_client(tmp_path) as c:
        job = sleep_job(c)
        sqlite_full_disk(f"sqlite:///{tmp_path / 'platform.db'}")
        r = c.patch(f"{API}/jobs/{job['id']}", json={"note": "n" * 10_000})  # a few pages more than the file has
        assert r.status_code == 507 and error_code(r) == "disk_full", r.text
        assert "full" in r.json()["error"]["message"]
    dispose_engines()


def test_postgres_disk_full_and_enospc_are_507(client, monkeypatch):
    import errno

    import psycopg.errors

    from ptmlab.api.routes import workers

    pg = psycopg.errors.DiskFull('could not extend file "base/16384/2619": No space left on device')
    for exc in (
        sa.exc.OperationalError("INSERT", {}, pg),
        sa.exc.OperationalError("INSERT", {}, sqlite3.OperationalError("database or disk is full")),
        OSError(errno.ENOSPC, "No space left on device", "/var/lib/ptmlab/jobs/1.log"),
    ):

        def broken(_session, exc=exc):
            raise exc

        monkeypatch.setattr(workers.queue, "list_workers", broken)
        r = client.get(f"{API}/workers")
        assert r.status_code == 507 and error_code(r) == "disk_full", (exc, r.text)
    monkeypatch.setattr(
        workers.queue,
        "list_workers",
        lambda _s: (_ for _ in ()).throw(
            sa.exc.OperationalError("SELECT", {}, sqlite3.OperationalError("database is locked"))
        ),
    )
    r = client.get(f"{API}/workers")
    assert r.status_code == 500 and error_code(r) == "internal_error"


# -- slow clients --------------------------------------------------------------------------------


def test_serve_drops_slow_header_and_slow_body_clients(tmp_path):
    from api_server import LiveApi  # tests/platform's: a real `ptmlab serve` on a free loopback port

    api = LiveApi(
        f"sqlite:///{tmp_path / 'platform.db'}",
        tmp_path / "home",
        tmp_path,
        env={"PTMLAB_API_READ_TIMEOUT_S": "1", "MLFLOW_TRACKING_URI": None},
    )
    api.start()
    try:
        slow_headers = b"GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
        slow_body = (
            b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"stage": '
        )
        # Headers not in time: a 408; a body not in time: the connection is cut (the route sees a disconnect).
        for partial, expected in ((slow_headers, b"HTTP/1.1 408 "), (slow_body, b"")):
            with socket.create_connection(("127.0.0.1", api.port)) as sock:
                sock.sendall(partial)
                sock.settimeout(60)  # a bound on the wait only: the server closes long before
                answer = b""
                while chunk := sock.recv(4096):
                    answer += chunk
            assert answer.startswith(expected) and (not expected or b'"request_timeout"' in answer), answer[:300]
        with socket.create_connection(("127.0.0.1", api.port)) as sock:  # a client that sends nothing at all
            sock.settimeout(60)
            assert sock.recv(4096).startswith(b"HTTP/1.1 408 ")
    finally:
        api.kill()


def test_every_command_names_a_token_of_only_spaces_in_one_line(tmp_path):
    """Not only `serve`: a worker (or any command) started with a blank token says so in one line."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PTMLAB_API_TOKEN": "   ", "PTMLAB_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.cli", "worker", "--burst"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error[config_error]: PTMLAB_API_TOKEN: a token of only spaces: give one with a non-space character, "
        "or leave it unset"
    ]

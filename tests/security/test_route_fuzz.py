"""Issue 41: property-based checks that no route answers a 5xx and that no path outside the roots
is ever accepted.

- Path values (hypothesis): absolute, relative, `..` at every depth, `~`, `file:` URLs, symlinks
  planted in home that point out of it (and into it), unicode, very long names, in every key that
  takes a path. A value is accepted only if the path a worker will open (resolved against
  PTMLAB_HOME, where it runs jobs, symlinks followed) is inside the roots, and never climbs out of
  the folder a reader joins it to.
- Every route (schemathesis over /openapi.json, studies and pipelines included) against a real
  `ptmlab serve` with a token, authenticated: no 5xx.

Budgets are fixed (`PTMLAB_FUZZ_EXAMPLES`, default 300 path values; schemathesis 15 examples per
operation, at most 60 s) and seeded, so `make test` stays bounded and repeatable.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("PTMLAB_FUZZ_EXAMPLES", "300"))
PATH_KEYS = [
    "backbone",
    "source",
    "task.data.train",
    "task.data.test",
    "task.data.data_dir",
    "data.corpus.path",
    "model.name_or_path",
    "probe.data.train",
    "task.data.files.train",
]

segment = st.one_of(
    st.sampled_from(
        ["..", ".", "", "~", "link_out", "link_in", "export", "etc", "passwd", ".env", "home", "data", "x" * 300]
    ),
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/="), min_size=1, max_size=12
    ),
)
path_value = st.builds(
    lambda prefix, parts: prefix + "/".join(parts),
    st.sampled_from(["", "/", "~/", "./", "../", "file:", "file://", "file:///", "\\", "~root/"]),
    st.lists(segment, min_size=0, max_size=6),
)


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    home, data, outside = base / "home", base / "data", base / "outside"
    for folder in (home, data, outside):
        folder.mkdir()
    (home / "link_out").symlink_to(outside)  # planted: points out of the roots
    (home / "link_in").symlink_to(data)  # points to another root
    return [home.resolve(), data.resolve()], outside.resolve()


def _opened_path(value: str, home: Path) -> Path:
    """The path a worker opens for `value`: the job runs in PTMLAB_HOME (ptmlab.run)."""
    value = value.removeprefix("file://").removeprefix("file:")
    path = Path(os.path.expanduser(value))
    return (path if path.is_absolute() else home / path).resolve()


@seed(41)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(key=st.sampled_from(PATH_KEYS), value=path_value)
def test_no_path_outside_the_roots_is_accepted(roots, key, value):
    from ptmlab.api.validation import check_override_allowed
    from ptmlab.errors import ConfigError

    allowed, outside = roots
    quoted = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    try:
        check_override_allowed(f"{key}={quoted}", allowed)
    except ConfigError:
        return  # refused (a ForbiddenOverrideError, or a value Hydra cannot parse): fine
    opened = _opened_path(value, allowed[0])
    assert any(opened == r or opened.is_relative_to(r) for r in allowed), (key, value, opened)
    assert not opened.is_relative_to(outside)
    # A reader may join a relative value to its own folder: it must not climb out of that either.
    if not value.startswith(("/", "~", "\\", "file:")):
        assert os.path.normpath(value).split("/")[0] != "..", (key, value)


@pytest.mark.slow
def test_schemathesis_with_a_token_finds_no_server_error(tmp_path):
    """Every operation of the schema, authenticated, against a live server (the token-less run is
    tests/platform/test_api_live.py's)."""
    from api_server import LiveApi

    from ptmlab.db import dispose_engines

    token = "fuzz-token-41"
    api = LiveApi(f"sqlite:///{tmp_path / 'platform.db'}", tmp_path / "home", tmp_path, token=token)
    try:
        api.start()
        exe = Path(sys.executable).parent / "schemathesis"
        proc = subprocess.run(
            [
                str(exe),
                "run",
                f"{api.base}/openapi.json",
                "--checks",
                "not_a_server_error",
                "--max-examples",
                "15",
                "--phases",
                "examples,coverage,fuzzing",
                "--seed",
                "41",
                "--no-shrink",
                "--workers",
                "1",
                "--max-time",
                "60",
                "--request-timeout",
                "30",
                "--generation-allow-x00",
                "true",
                "-H",
                f"Authorization: Bearer {token}",
            ],
            capture_output=True,
            text=True,
            timeout=200,
            cwd=tmp_path,
        )
        out = proc.stdout + proc.stderr
        print(out[-3000:])
        assert proc.returncode == 0, out[-4000:]
    finally:
        api.kill()
        dispose_engines()

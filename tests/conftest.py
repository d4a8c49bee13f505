"""Shared test set-up: offline Hugging Face, a private PTMLAB_HOME per test, the shared data.

Tests that need the real data in ../shared/data take the `data_dir` fixture: on a user's machine
without it they skip with the reason; in CI (`PTMLAB_REQUIRE_DATA=1`, set by .ci/run) a missing
folder fails them instead, so CI can never pass by skipping.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
# FastAPI's TestClient sends `Host: testserver`; the API answers only its own names
# (ptmlab.api.request_guard), so the tests name it as a deployment names its public host.
os.environ.setdefault("PTMLAB_API_ALLOWED_HOSTS", "testserver")

REPO_ROOT = Path(__file__).resolve().parents[1]
# Shared test helpers (pg.py, api_server.py, synthetic_results.py) live in tests/platform; the e2e
# tests and bench/ import them too.
sys.path.insert(0, str(REPO_ROOT / "tests" / "platform"))


def _find_data_dir() -> Path | None:
    env = os.environ.get("PTMLAB_DATA_DIR")
    candidates = [Path(env)] if env else [REPO_ROOT.parent / "shared" / "data"]
    for c in candidates:
        if (c / "glue").is_dir() or (c / "corpus").is_dir():
            return c.resolve()
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    found = _find_data_dir()
    if found is None:
        msg = "shared data not found: set PTMLAB_DATA_DIR to a folder with glue/ senteval/ ud/ corpus/"
        if os.environ.get("PTMLAB_REQUIRE_DATA") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    os.environ["PTMLAB_DATA_DIR"] = str(found)
    return found


@pytest.fixture()
def ptmlab_home(tmp_path, monkeypatch) -> Path:
    """A private PTMLAB_HOME (platform DB, MLflow store, runs) for one test."""
    home = tmp_path / "ptmlab_home"
    home.mkdir()
    monkeypatch.setenv("PTMLAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    from ptmlab.settings import get_settings

    get_settings.cache_clear()
    yield home
    get_settings.cache_clear()


@pytest.fixture(scope="module")
def module_ptmlab_home(tmp_path_factory) -> Path:
    """A private PTMLAB_HOME shared by every test of one module (its runs feed each other)."""
    from ptmlab.settings import get_settings

    home = tmp_path_factory.mktemp("ptmlab_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PTMLAB_HOME", str(home))
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        get_settings.cache_clear()
        yield home
    get_settings.cache_clear()

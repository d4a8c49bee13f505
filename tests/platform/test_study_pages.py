"""The studies pages (issue 26 item 6): the study view and its endpoint, the list and study pages,
404s. The study is real (ptmlab.studies on SQLite, Optuna's tables in the same database), its
trials' jobs played by hand as in test_studies.py's pruner test: each job reports one validation
at a time and the study advances after each, so the pruner really prunes. No worker runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hand_driven_study import SPACE, STEPS_PER_VALIDATION, VALIDATIONS, drive_study_by_hand


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    """(database URL, home, the driven study's id, a just-created study's id) on one SQLite file."""
    from ptmlab import studies
    from ptmlab.db import dispose_engines, get_sessionmaker
    from ptmlab.studies.storage import forget_storages

    tmp = tmp_path_factory.mktemp("study_pages")
    url = f"sqlite:///{tmp / 'platform.db'}"
    done = drive_study_by_hand(url, n_trials=8)
    # A study whose only trial is queued: nothing complete, so no importances.
    plan = studies.plan_study(
        studies.StudySpec(name="fresh", stage="sleep", overrides=SPACE, objective="val/score", n_trials=4, n_parallel=1)
    )
    with get_sessionmaker(url)() as s:
        fresh = studies.create_study(s, plan, url=url, driver_id="test").id
    yield url, tmp / "home", done, fresh
    forget_storages()
    dispose_engines()


def _client(url: str, home: Path, monkeypatch) -> TestClient:
    from ptmlab.api.app import create_app
    from ptmlab.settings import Settings

    monkeypatch.setenv("PTMLAB_HOME", str(home))
    return TestClient(create_app(Settings(home=home, database_url=url)))


def test_study_view_trials_best_history_importances_and_curves(driven):
    from ptmlab.db import session_scope
    from ptmlab.views.studies import study_view

    url, _, study_id, _ = driven
    with session_scope(url) as s:
        view = study_view(s, study_id, url=url)
    trials = view["trials"]
    assert view["study"]["status"] == "finished" and view["objective"] == "val/score"
    assert [t["number"] for t in trials] == list(range(8))
    assert [p["name"] for p in view["params"]] == ["stage.quality", "stage.seconds"]
    assert view["params"][0]["kind"] == "float" and view["params"][1] == {
        "name": "stage.seconds",
        "kind": "categorical",
        "log": False,
        "choices": [1, 2],
        "key": "stage.seconds",
        "values": sorted({t["params"]["stage.seconds"] for t in view["trials"]}),
        "log_scale": False,
    }
    pruned = [t for t in trials if t["state"] == "pruned"]
    complete = [t for t in trials if t["state"] == "complete"]
    assert pruned and len(complete) >= 2 and len(pruned) + len(complete) == 8
    for t in trials:
        assert set(t["params"]) == {"stage.quality", "stage.seconds"} and t["job_id"] is not None
        # Steps trained: where the job was when it ended (every validation is 4 steps).
        assert t["steps"] == STEPS_PER_VALIDATION * len(t["intermediate"])
        assert [p["validation"] for p in t["intermediate"]] == list(range(1, len(t["intermediate"]) + 1))
    # A pruned trial's curve stops early, beside the survivors' full ones.
    assert all(1 <= len(t["intermediate"]) < VALIDATIONS for t in pruned)
    # Optuna records a pruned trial's value as its last intermediate one; the history leaves it out.
    assert all(t["value"] == t["intermediate"][-1]["value"] for t in pruned)
    assert all(len(t["intermediate"]) == VALIDATIONS for t in complete)
    best = max(complete, key=lambda t: t["value"])
    assert view["best"] == best["number"] and best["job_status"] == "succeeded"
    assert view["best_run"]["number"] == best["number"] and view["best_run"]["job_id"] == best["job_id"]
    assert view["best_run"]["score"] == best["value"] and view["best_run"]["degenerate"] is False
    assert view["maximize"] is True and view["metric"] == "val/score"
    # per searched value: the mean of the complete trials' objective with that value, their jobs
    for entry in view["per_value"]["stage.seconds"]:
        values = [t["value"] for t in complete if t["params"]["stage.seconds"] == entry["value"]]
        assert entry["n"] == len(values) and entry["mean"] == pytest.approx(
            sum(values) / len(values) if values else None
        )
    ranked = sorted(complete, key=lambda t: -t["value"])
    assert view["top_job_ids"] == [t["job_id"] for t in ranked[:5]]
    assert {r["job_id"] for r in view["runs"]} == {t["job_id"] for t in trials}
    # The history: complete trials in order, with the running best.
    assert [h["number"] for h in view["history"]] == [t["number"] for t in complete]
    running_best = [max(t["value"] for t in complete[: i + 1]) for i in range(len(complete))]
    assert [h["best"] for h in view["history"]] == pytest.approx(running_best)
    assert view["history"][-1]["best"] == pytest.approx(best["value"])
    # Optuna's importances over both searched keys; the score follows stage.quality alone.
    imp = view["importances"]
    assert set(imp) == {"stage.quality", "stage.seconds"} and sum(imp.values()) == pytest.approx(1.0)
    assert imp["stage.quality"] > imp["stage.seconds"]


def test_importances_say_why_they_are_missing(driven):
    from ptmlab.db import session_scope
    from ptmlab.views.studies import study_view

    url, _, _, fresh = driven
    with session_scope(url) as s:
        view = study_view(s, fresh, url=url)
    assert view["importances"] is None and "at least 2 complete trials (0 so far)" in view["importances_note"]
    assert [t["state"] for t in view["trials"]] == ["running"] and view["history"] == [] and view["best"] is None


def test_study_endpoint_pages_and_not_found(driven, monkeypatch):
    url, home, study_id, fresh = driven
    client = _client(url, home, monkeypatch)
    r = client.get(f"/api/v1/views/studies/{study_id}")
    assert r.status_code == 200 and r.json()["study"]["id"] == study_id and r.json()["importances"]
    missing = client.get("/api/v1/views/studies/nosuchstudy")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert client.get("/api/v1/views/studies/bad%20id").status_code == 422

    listing = client.get("/studies")
    assert listing.status_code == 200 and 'href="/studies"' in listing.text
    for sid, name in ((study_id, "by_hand"), (fresh, "fresh")):
        assert f'data-id="{sid}"' in listing.text and f'href="/studies/{sid}"' in listing.text and name in listing.text
    assert "1 running" in listing.text and "finished" in listing.text
    page = client.get(f"/studies/{study_id}")
    assert page.status_code == 200 and f'data-study-id="{study_id}"' in page.text and "/static/js/study.js" in page.text
    assert 'aria-current="page"' in page.text
    unknown = client.get("/studies/nosuchstudy")
    assert unknown.status_code == 404 and "Not found" in unknown.text and "study nosuchstudy not found" in unknown.text


def test_studies_list_when_there_are_none(tmp_path, monkeypatch):
    from ptmlab.db import dispose_engines

    client = _client(f"sqlite:///{tmp_path / 'platform.db'}", tmp_path / "home", monkeypatch)
    r = client.get("/studies")
    assert r.status_code == 200 and "No studies yet" in r.text
    dispose_engines()


def test_a_stored_spec_that_no_longer_validates_still_lists_as_stored():
    from ptmlab.studies.spec import StudySpec, stored_spec

    spec = StudySpec(stage="finetune", overrides=["optimizer.lr=interval(1e-5,1e-3)"], objective="val/acc").model_dump()
    assert stored_spec(spec) == StudySpec.model_validate(spec)
    old = {**spec, "budget_s": 60, "sampler": "anneal"}  # a removed field, a sampler no longer offered
    read = stored_spec(old)
    assert (read.stage, read.objective, read.sampler, read.n_trials) == ("finetune", "val/acc", "anneal", 16)

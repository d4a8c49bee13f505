"""Every /api/v1/views route against its declared `response_model` (ptmlab.api.view_models): one
SQLite database holding results of every kind (fine-tunes of every board, multi-task, compress,
probe suites, pretrain, attacks, a sweep, a single- and a multi-objective study, a probed lineage,
a metric history in MLflow), each route and each variant that changes its JSON's shape called
through the app and its body validated by the model the route declares, strictly and with extra
keys forbidden. Most routes send pre-encoded bytes FastAPI never checks, so this test is what keeps
their declarations honest; and every /views route in the OpenAPI schema has a 200 schema."""

from __future__ import annotations

import random
import typing
from pathlib import Path

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hand_driven_study import drive_study_by_hand
from pydantic import BaseModel, TypeAdapter
from synthetic_results import _finetune, probe_suite_summary, seed_adaptation_results, seed_dashboard
from test_robustness_view import seed_robustness
from test_study_multiobjective import drive_compress_study

from ptmlab.api.schemas import ProgressOut
from ptmlab.contracts import CompressSummary, FinetuneSummary
from ptmlab.contracts.summaries import GenerationNumbers, Measurement, PretrainSummary, Throughput
from ptmlab.db import session_scope
from ptmlab.db.models import SUCCEEDED, Job, Worker, utcnow
from ptmlab.queue import submit_job, submit_sweep
from ptmlab.results import clear_cache, new_result

API, VIEWS = "/api/v1", "/api/v1/views"
# Records a stage writes with fields of its own (kept as extras by their contracts), not a view's keys.
OPEN_MODELS = (Throughput, ProgressOut)
SWEEP_SCORES = {1e-4: (0.82, 0.84, 0.83), 1e-3: (0.509, 0.61, 0.70)}  # lr -> SST-2 accuracy per seed


def _done(session, stage: str, *, name: str, overrides=(), depends_on=(), run_dir: Path | None = None) -> Job:
    job = submit_job(
        session, stage=stage, overrides=list(overrides), depends_on=list(depends_on), name=name, queue="seeded"
    )
    job.status, job.run_dir = SUCCEEDED, str(run_dir) if run_dir else None
    session.commit()
    return job


def _rich_finetune() -> dict:
    """A fine-tune with what only some runs record: throughput, confusion, recipe, warnings, baseline."""
    summary = _finetune("bert_tiny", "mlm", "lora", "sst2", 3, {"accuracy": 0.81, "f1": 0.8})
    confusion = {"labels": ["0", "1"], "matrix": [[40, 10], [9, 41]], "per_class": [], "examples": 100, "errors": 19}
    return {
        **summary,
        "throughput": Throughput(tokens_per_s=1200.5, samples_per_s=30.0, device="cpu", timed_steps=10).model_dump(),
        "confusion": confusion,
        "recipe": {
            "name": "glue_small",
            "requested": "auto",
            "values": {"stage.lr": {"value": 1e-4, "origin": "recipe"}},
        },
        "warnings": ["fewer than 100 steps"],
        "config_hash": "rich",
    }


def _task_board_finetunes() -> list[dict]:
    """A SQuAD run (the tasks board) and a translation run (the generation board, with its decoding)."""
    squad = FinetuneSummary(
        seed=0, wall_time_s=1.0, model="bert_tiny", objective="mlm", adaptation="full", task="squad",
        task_kind="span_extraction", metrics={"exact_match": 61.0, "f1": 70.5}, main_metric="f1", main_score=70.5,
        trainable_params=10, total_params=10, train_time_s=1.0, steps=10,
    ).model_dump()  # fmt: skip
    translation = FinetuneSummary(
        seed=0, wall_time_s=1.0, model="t5_tiny", objective="span", adaptation="full", task="wmt16_ro_en",
        task_kind="generation", metrics={"bleu": 21.3, "chrf": 45.2}, main_metric="bleu", main_score=21.3,
        trainable_params=10, total_params=10, train_time_s=1.0, steps=10,
        generation=GenerationNumbers(
            decoding={"strategy": "beam", "num_beams": 4}, metric_signatures={"bleu": "nrefs:1"},
            generated_tokens=500, tokens_per_s=250.0, latency_ms_per_example=12.0,
        ),
    ).model_dump()  # fmt: skip
    return [squad, translation]


def _multitask() -> dict:
    return FinetuneSummary(
        stage="multitask", seed=0, wall_time_s=1.0, model="bert_tiny", objective="mlm", adaptation="full",
        task="sst2+rte", tasks=["sst2", "rte"], metrics={"accuracy": 0.8}, main_metric="accuracy", main_score=0.8,
        task_metrics={"sst2": {"accuracy": 0.8}, "rte": {"accuracy": 0.55}},
        task_main_metrics={"sst2": "accuracy", "rte": "accuracy"},
        trainable_params=10, total_params=10, train_time_s=1.0, steps=10,
    ).model_dump()  # fmt: skip


def _pretrain() -> dict:
    return PretrainSummary(
        seed=0, wall_time_s=1.0, model="bert_tiny", family="bert", objective="mlm", data="wikitext", steps=50,
        train_loss=4.1, val_loss=4.3, val_perplexity=73.7, tokens_seen=51_200, train_flops=1e12, params=4_400_000,
        vocab_size=30_522, checkpoint="last.ckpt", export_dir="export",
    ).model_dump()  # fmt: skip


def _compressed_probe_source(score: float) -> dict:
    return CompressSummary(
        seed=0,
        wall_time_s=1.0,
        method="prune_magnitude",
        source_ref="job:0",
        task="sst2",
        compressed=Measurement(score=score, params=2_000_000, size_bytes=8_000_000, latency_ms=3.0),
        source=Measurement(score=0.9, params=4_400_000, size_bytes=17_600_000, latency_ms=9.0),
    ).model_dump(exclude_none=True)


def _metric_history(home: Path) -> str:
    """An MLflow run in the store the API reads (PTMLAB_HOME's), with a loss curve and a validation point."""
    from ptmlab.tracking import mlflow_client

    client = mlflow_client(f"sqlite:///{home / 'mlflow.db'}")
    experiment = client.create_experiment("views", artifact_location=str(home / "artifacts"))
    run = client.create_run(experiment)
    for step, loss in enumerate([3.0, 2.5, 2.1]):
        client.log_metric(run.info.run_id, "train/loss", loss, step=step * 10)
    client.log_metric(run.info.run_id, "val/sst2/acc", 0.8, step=30)
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def _fill(url: str, home: Path) -> dict:
    """Every kind of result the views read; returns the ids the calls need."""
    ids: dict = {"single_study": drive_study_by_hand(url, n_trials=4, name="views_single")}
    ids["multi_study"] = drive_compress_study(url, sampler="random")
    with session_scope(url) as s:
        ids["dashboard"] = seed_dashboard(s)
        seed_adaptation_results(s)
    ids["robustness"], ids["pipelines"] = seed_robustness(url, home)
    mlflow_run = _metric_history(home)
    rng = random.Random(5)
    with session_scope(url) as s:
        # a sweep of two learning rates over three seeds (one run at SST-2's majority-class baseline)
        lrs = [(lr, seed) for lr in SWEEP_SCORES for seed in (1, 2, 3)]
        sweep, jobs = submit_sweep(
            s,
            [
                {"stage": "finetune", "seed": seed, "overrides": [f"stage.lr={lr}"], "queue": "seeded"}
                for lr, seed in lrs
            ],
            name="lr",
        )
        for job, (lr, seed) in zip(jobs, lrs, strict=True):
            job.status = SUCCEEDED
            score = SWEEP_SCORES[lr][seed - 1]
            params = {"stage.lr": lr, "model.name": "sweep_bert", "task.name": "sst2"}
            summary = _finetune("sweep_bert", "mlm", "full", "sst2", seed, {"accuracy": score}, params=params)
            s.add(new_result(summary, job_id=job.id, sweep_id=sweep.id, tags={"suite": "sweep"}))
        ids["sweep"] = sweep.id
        # a lineage: pretrain -> fine-tune -> compress, the pretrain and the compressed model probed
        run_dir = home / "jobs" / "rich" / "run"
        run_dir.mkdir(parents=True)
        (run_dir / "config.yaml").write_text("stage:\n  name: finetune\n  lr: 0.0001\nmodel:\n  name: bert_tiny\n")
        pretrain = _done(s, "pretrain", name="lineage-pretrain", overrides=["model=bert_tiny", "objective=mlm"])
        finetune = _done(s, "finetune", name="lineage-finetune", depends_on=[pretrain.id], run_dir=run_dir)
        compress = _done(s, "compress", name="lineage-compress", depends_on=[finetune.id])
        multitask = _done(s, "multitask", name="multitask")
        s.add_all(
            [
                new_result(_pretrain(), job_id=pretrain.id),
                new_result({**_rich_finetune(), "mlflow_run_id": mlflow_run}, job_id=finetune.id),
                new_result(_compressed_probe_source(0.85), job_id=compress.id),
                new_result(_multitask(), job_id=multitask.id),
                *(new_result(summary) for summary in _task_board_finetunes()),
            ]
        )
        probes = {}
        for model in (pretrain, compress):
            probe = _done(s, "probe", name=f"probe-{model.name}", depends_on=[model.id])
            s.add(new_result(probe_suite_summary(rng, model.name, seed=1), job_id=probe.id))
            probes[model.name] = probe.id
        now = utcnow()
        s.add(
            Worker(
                id="gpu-07-4711-ab12",
                hostname="gpu-07",
                pid=4711,
                gpus=[0],
                queues=["default"],
                slurm_job_id="4711",
                slurm_node="gpu-07",
                ends_at=now.replace(year=now.year + 1),
            )
        )
        s.commit()
        ids["jobs"] = {
            "pretrain": pretrain.id,
            "finetune": finetune.id,
            "compress": compress.id,
            "multitask": multitask.id,
            "probe": probes["lineage-compress"],
        }
    return ids


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """(a client of the app on the filled database, the ids its calls need)."""
    from ptmlab.api.app import create_app
    from ptmlab.db import dispose_engines
    from ptmlab.settings import Settings
    from ptmlab.studies.storage import forget_storages

    tmp = tmp_path_factory.mktemp("view_models")
    url, home = f"sqlite:///{tmp / 'platform.db'}", tmp / "home"
    clear_cache()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PTMLAB_HOME", str(home))  # the metric curves' MLflow store is the settings' own
        ids = _fill(url, home)
        yield TestClient(create_app(Settings(home=home, database_url=url))), ids
    clear_cache()
    forget_storages()
    dispose_engines()


def calls(client: TestClient, ids: dict) -> list[tuple[str, dict]]:
    """Each /views route in the variants that change its JSON's shape: (path, query)."""
    jobs, dash, rob = ids["jobs"], ids["dashboard"], ids["robustness"]
    compared = []
    for query in ({"sweep_id": ids["sweep"]}, {"tag": "suite=adaptation"}):  # >= 3 seeds a side; 2 (no test)
        rows = client.get(f"{VIEWS}/leaderboard", params=query).json()["rows"]
        compared.append(("/leaderboard/compare", {**query, "a": rows[0]["label"], "b": rows[1]["label"]}))
    by_hand = dash["results"]["finetune"][1:3]  # the seeded finetune rows without a job
    out = [
        ("/overview", {}),
        ("/leaderboard", {}),
        ("/leaderboard", {"pool": "true"}),
        ("/leaderboard", {"tag": "suite=adaptation", "adaptation": "lora,bitfit"}),
        ("/leaderboard", {"group_by": "model,stage.lr", "sweep_id": ids["sweep"]}),
        *(("/leaderboard", {"benchmark": b}) for b in ("superglue", "tasks", "generation")),
        *compared,
        (f"/sweeps/{ids['sweep']}", {}),
        (f"/sweep/{ids['sweep']}", {}),  # the older path, out of the schema
        ("/probe-drift", {}),
        ("/probe-drift", {"source": jobs["pretrain"]}),  # the first task, the attention maps: no curve
        ("/probe-drift", {"source": jobs["pretrain"], "task": "upos"}),  # probed itself: the differences
        ("/probe-drift", {"source": jobs["finetune"], "task": "upos", "metric": "selectivity"}),  # no reference
        ("/probe-drift", {"source": jobs["pretrain"], "task": "distance", "metric": "uuas"}),
        ("/compression", {}),
        ("/compression", {"task": "sst2"}),
        ("/compression", {"tag": "suite=none"}),  # no rows
        ("/compression", {"study": ids["multi_study"]}),
        ("/robustness", {}),
        ("/robustness", {"pipeline": ids["pipelines"]["robustness_compressed"], "task": "sst2"}),
        ("/probing", {}),
        ("/probing", {"tag": "suite=none"}),  # no rows
        ("/runs", {}),
        ("/runs", {"kind": "attack", "column": ["recipe", "accuracy_under_attack", "tag.suite"], "sort": "seed"}),
        ("/runs", {"group_by": "model,stage.lr", "column": ["main_score", "task", "stage.lr"], "sort": "main_score"}),
        ("/runs", {"group_by": "kind", "filter": ["main_score>0.5"], "order": "asc", "limit": 5}),
        ("/compare", {"jobs": f"{jobs['finetune']},{jobs['compress']},{jobs['probe']},{jobs['pretrain']}"}),
        ("/compare", {"jobs": str(rob["a-teacher-dwb"]), "runs": ",".join(map(str, by_hand))}),
        ("/curves", {"jobs": f"{jobs['finetune']},{jobs['compress']}"}),
        ("/curves", {"jobs": str(jobs["finetune"]), "key": "train/loss"}),
        *((f"/jobs/{job_id}", {}) for job_id in (*jobs.values(), rob["a-teacher-dwb"], rob["teacher"])),
        *((f"/jobs/{dash['jobs'][label]}", {}) for label in ("queued", "running", "failed", "pipeline_child")),
        (f"/studies/{ids['single_study']}", {}),
        (f"/studies/{ids['multi_study']}", {}),
    ]
    return out


def view_routes() -> list[APIRoute]:
    """The /views routes as declared (the app includes their router under /api/v1)."""
    from ptmlab.api.routes.views import router

    return [r for r in router.routes if isinstance(r, APIRoute)]


def _route(path: str) -> APIRoute:
    route = next((r for r in view_routes() if "GET" in r.methods and r.path_regex.match(path)), None)
    assert route is not None, f"no route serves {VIEWS}{path}"
    return route


def _models(annotation) -> list[type[BaseModel]]:
    """The models an annotation holds, at any depth (a union, a list's items, a dict's values)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _nested(model: type[BaseModel], seen: set) -> None:
    if model in seen:
        return
    seen.add(model)
    for field in model.model_fields.values():
        for inner in _models(field.annotation):
            _nested(inner, seen)


def test_every_view_validates_against_its_declared_model(filled):
    client, ids = filled
    covered = set()
    for path, query in calls(client, ids):
        route = _route("/views" + path)
        covered.add(route.path)
        response = client.get(VIEWS + path, params=query)
        assert response.status_code == 200, (path, query, response.text[:500])
        # strict: an int where a float is declared is fine, a float where an int is, or a number as text, is not
        TypeAdapter(route.response_model).validate_json(response.content, strict=True)
    views = {r.path for r in view_routes()}
    assert covered == views, f"views no call covers: {sorted(views - covered)}"


def test_the_views_hold_what_makes_each_shape(filled):
    """The data reaches the optional parts of the models, so they are validated, not skipped."""
    client, ids = filled
    get = lambda path, **query: client.get(VIEWS + path, params=query).json()
    jobs = ids["jobs"]
    assert any(w["slurm"] for w in get("/overview")["workers"])
    assert get("/compression", study=ids["multi_study"])["study"]["pareto_trials"]
    assert get("/compression", task="sst2")["references"]
    assert any(m["robustness"] for m in get("/compression", task="sst2")["references"])
    assert get("/runs", group_by="kind")["groups"]
    drift = get("/probe-drift", source=jobs["pretrain"], task="upos")
    assert drift["has_reference"] and all(c["diff"] is not None for c in drift["curves"]) and len(drift["curves"]) == 2
    assert get("/probe-drift", source=jobs["finetune"], task="upos")["curves"][0]["diff"] is None
    assert get("/probe-drift")["sources"]
    curves = get("/curves", jobs=str(jobs["finetune"]))
    assert curves["curves"]["train/loss"][0]["values"] == [3.0, 2.5, 2.1]
    probing = get("/probing")
    assert probing["heatmaps"] and probing["cloze"] and any(c.get("uuas") for c in probing["curves"])
    finetune = get(f"/jobs/{jobs['finetune']}")
    assert finetune["config_source"] == "run folder" and finetune["results"][0]["throughput"]["tokens_per_s"] == 1200.5
    assert finetune["results"][0]["digest"]["confusion"] and finetune["results"][0]["digest"]["recipe"]
    assert get(f"/jobs/{jobs['probe']}")["results"][0]["digest"]["probes"]
    sweep = get(f"/sweeps/{ids['sweep']}")
    assert sweep["best"] is not None and any(r["degenerate"] for r in sweep["runs"])
    board = get("/leaderboard", sweep_id=ids["sweep"])
    a, b = (row["label"] for row in board["rows"])
    compared = get("/leaderboard/compare", a=a, b=b, sweep_id=ids["sweep"])["comparisons"]
    assert compared and compared[0]["test"] == "paired t-test" and compared[0]["p_value"] is not None
    assert any(c["multitask"] for row in get("/leaderboard")["rows"] for c in row["cells"].values())
    study = get(f"/studies/{ids['single_study']}")
    assert study["history"] and study["best_run"] is not None and study["runs"]


def test_each_views_openapi_200_has_a_schema_and_every_model_forbids_extra_keys(filled):
    client, _ = filled
    schema = client.app.openapi()
    paths = {p: item for p, item in schema["paths"].items() if p.startswith(VIEWS)}
    assert paths
    for path, item in paths.items():
        body = item["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert body.get("$ref") or body.get("anyOf"), (path, body)
    assert {API + r.path for r in view_routes() if r.include_in_schema} == set(paths)
    seen: set = set()
    for route in view_routes():
        assert route.response_model is not None, route.path
        for model in _models(route.response_model):
            _nested(model, seen)
    open_models = {m for m in seen if m.model_config.get("extra") != "forbid"}
    assert open_models <= set(OPEN_MODELS), sorted(m.__name__ for m in open_models - set(OPEN_MODELS))

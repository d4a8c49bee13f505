"""conf/pipeline/survey.yaml: the research loop as one DAG. Every job composes (a key a stage does
not have would fail here, not on a worker), and the edges are the lineage the dashboard follows:
pretrain -> fine-tune (tasks × seeds) -> compress (methods) -> probe of each of them."""

from __future__ import annotations

import pytest

from ptmlab import queue
from ptmlab.config import compose_config
from ptmlab.db import dispose_engines, get_sessionmaker, migrate


@pytest.fixture(scope="module")
def survey():
    return queue.load_pipeline("survey"), queue.expand_pipeline("survey")


def test_every_job_of_the_survey_composes(survey):
    _, jobs = survey
    for job in jobs:
        compose_config([f"stage={job.stage}", *job.overrides])


def test_the_survey_expands_into_one_dag_with_lineage(survey, tmp_path):
    spec, jobs = survey
    v = spec["vars"]
    presets, tasks, seeds, methods, probes = (len(v[k]) for k in ("preset", "task", "seed", "method", "probe"))
    finetunes = presets * tasks * seeds
    assert sum(j.stage == "pretrain" for j in jobs) == presets
    assert sum(j.stage == "finetune" for j in jobs) == finetunes
    assert sum(j.stage == "compress" for j in jobs) == finetunes * methods
    # the pretrained encoder, every fine-tuned one and every compressed one, per suite
    assert sum(j.stage == "probe" for j in jobs) == (presets + finetunes + finetunes * methods) * probes

    url = f"sqlite:///{tmp_path / 'ptmlab.db'}"
    migrate(url)
    with get_sessionmaker(url)() as s:
        pipeline, queued = queue.submit_pipeline(s, "survey")
        by_id = {j.id: j for j in queued}
        for job in queued:
            parents = [by_id[p] for p in job.parent_ids]
            expected = {"pretrain": set(), "finetune": {"pretrain"}, "compress": {"finetune"}}.get(job.stage)
            if job.stage == "probe":
                assert len(parents) == 1 and parents[0].stage in {"pretrain", "finetune", "compress"}, job.name
            else:
                assert {p.stage for p in parents} == expected, job.name
        # one whole lineage, from a compressed model's probe back to its pretraining
        by_name = {j.name: j for j in queued}
        chain = ["probe-bert-glue/sst2-s2-distill-upos"]
        while by_name[chain[-1]].parent_ids:
            chain.append(by_id[by_name[chain[-1]].parent_ids[0]].name)
    assert chain == [
        "probe-bert-glue/sst2-s2-distill-upos",
        "compress-bert-glue/sst2-s2-distill",
        "finetune-bert-glue/sst2-s2",
        "pretrain-bert",
    ]
    dispose_engines()

"""Hyperparameter studies through the queue: Optuna does the search (ask-and-tell), its storage
is the platform database, each trial is a queued job, pruning reads the progress the worker
already stores (DESIGN §8: a study is a platform object).

    plan = plan_study(StudySpec(stage="finetune", overrides=[...], objective="val/sst2/accuracy",
                                pruner="asha", n_trials=16, n_parallel=2))   # ConfigError: one line
    study = create_study(session, plan, url=url)          # the first n_parallel trials queued
    advance_running_studies(session, url=url, driver_id=worker_id)   # workers, each heartbeat
    study_status(session, study.id, url=url); stop_study(...); resume_study(...)
"""

from ptmlab.studies.driver import (
    advance_running_studies,
    advance_study,
    create_study,
    get_study,
    resume_study,
    stop_study,
)
from ptmlab.studies.plan import StudyPlan, plan_study
from ptmlab.studies.spec import StudySpec
from ptmlab.studies.status import study_status

__all__ = [
    "StudyPlan",
    "StudySpec",
    "advance_running_studies",
    "advance_study",
    "create_study",
    "get_study",
    "plan_study",
    "resume_study",
    "stop_study",
    "study_status",
]

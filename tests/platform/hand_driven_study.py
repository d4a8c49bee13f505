"""A real study (ptmlab.studies, Optuna's tables in the platform database) whose trials' jobs are
played by hand, as in test_studies.py's pruner test: no worker runs, each job reports one
validation at a time and the study advances after each, so the pruner really prunes. For the
studies pages' tests (tests/platform/test_study_pages.py, tests/e2e/test_dashboard_browser.py);
call it before any worker runs on the database (workers advance running studies too)."""

from __future__ import annotations

SPACE = ["stage.validations=4", "stage.quality=interval(0.05,1)", "stage.seconds=choice(1,2)"]
VALIDATIONS, STEPS_PER_VALIDATION = 4, 4


def drive_study_by_hand(url: str, *, n_trials: int, name: str = "by_hand") -> str:
    """A sleep-stage study under ASHA whose trials run one at a time by hand: trial k's score at
    validation v is quality * sqrt(v / 4) (the sleep stage's curve), at training step 4 v."""
    import sqlalchemy as sa

    from ptmlab import studies
    from ptmlab.db import PRUNED, QUEUED, RUNNING, SUCCEEDED, Job, get_sessionmaker

    plan = studies.plan_study(
        studies.StudySpec(
            name=name,
            stage="sleep",
            overrides=SPACE,
            objective="val/score",
            pruner="asha",
            sampler="random",
            n_trials=n_trials,
            n_parallel=1,
            seed=0,
            queue="parked",
        )
    )  # no worker serves "parked"
    with get_sessionmaker(url)() as s:
        study = studies.create_study(s, plan, url=url, driver_id="test")
        for _ in range(n_trials):
            job = s.scalar(sa.select(Job).where(Job.study_id == study.id, Job.status == QUEUED))
            quality = float(next(o for o in job.overrides if o.startswith("stage.quality=")).split("=")[1])
            job.status, job.worker_id = RUNNING, "by-hand"
            history = []
            for v in range(1, VALIDATIONS + 1):
                step = v * STEPS_PER_VALIDATION
                history.append({"step": step, "val/score": quality * (v / VALIDATIONS) ** 0.5})
                job.progress = {
                    "step": step,
                    "total_steps": VALIDATIONS * STEPS_PER_VALIDATION,
                    "metrics": {"val/score": history[-1]["val/score"]},
                    "history": list(history),
                }
                s.commit()
                studies.advance_study(s, study.id, url=url, driver_id="test")
                s.refresh(job)
                if job.cancel_requested:
                    break
            job.status = PRUNED if job.cancel_requested else SUCCEEDED
            s.commit()
            studies.advance_study(s, study.id, url=url, driver_id="test")
        return study.id

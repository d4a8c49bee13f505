"""`ptmlab study create | status | list | stop | resume`: hyperparameter studies (ptmlab.studies).

Like the queue commands they talk to the platform database directly (PTMLAB_DATABASE_URL), so a
study is created, watched and stopped with or without the API running. Bad input (an empty
search space, `interval(1,0)`, an objective the stage never reports, a pruner on a stage without
intermediate values) is one line on stderr, exit 2, nothing queued. A multi-objective study takes
`--objectives score,size_bytes --directions maximize,minimize` (fields of the stage's summary).

    ptmlab study create --stage finetune --objective val/sentiment/accuracy --pruner asha \\
        --n-trials 16 --n-parallel 2 task=demo/sentiment 'stage.lr=tag(log,interval(1e-4,1e-2))' \\
        'stage.batch_size=choice(8,16,32,64)'
"""

from __future__ import annotations

import argparse
import json


def _url(args) -> str:
    from ptmlab.db import default_url

    return args.database_url or default_url()


def _session(args):
    from ptmlab.db import get_sessionmaker

    return get_sessionmaker(_url(args))()


def spec_from_args(args: argparse.Namespace):
    from pydantic import ValidationError

    from ptmlab.errors import ConfigError
    from ptmlab.studies import StudySpec

    fields = {
        k: getattr(args, k)
        for k in (
            "name",
            "stage",
            "objective",
            "direction",
            "sampler",
            "pruner",
            "min_resource",
            "reduction_factor",
            "n_trials",
            "n_parallel",
            "max_wall_s",
            "max_steps",
            "seed",
            "queue",
            "priority",
            "gpus",
            "timeout_s",
        )
    }
    for key in ("objectives", "directions"):  # comma-separated on the command line
        value = getattr(args, key)
        fields[key] = [v.strip() for v in value.split(",") if v.strip()] if value is not None else None
    try:
        return StudySpec(**{k: v for k, v in fields.items() if v is not None}, overrides=list(args.overrides))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"--{'-'.join(str(p) for p in first['loc']).replace('_', '-')}: {first['msg']}") from None


def _cmd_create(args: argparse.Namespace) -> int:
    from ptmlab import studies

    plan = studies.plan_study(spec_from_args(args))
    with _session(args) as s:
        study = studies.create_study(s, plan, url=_url(args), driver_id="cli")
        status = studies.study_status(s, study.id, url=_url(args))
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print(
            f"study {study.id}: {len(status['trials'])} trial(s) queued; budget {plan.n_trials} trials, "
            f"{plan.spec.n_parallel} in parallel; `ptmlab study status {study.id}`"
        )
    return 0


def _print_status(status: dict) -> None:
    spec = status["spec"]
    print(
        f"study {status['id']} {status['name'] or ''}: {status['status']}"
        f"{' (' + status['stop_reason'] + ')' if status['stop_reason'] else ''}; {_objectives(spec)}, sampler {spec['sampler']}, pruner {spec['pruner']}; "
        f"{status['steps_total']} training steps in all"
    )
    print(f"{'trial':>5}  {'state':<9} {'job':>5} {'steps':>6} {'value':>10}  params")
    for t in status["trials"]:
        value = "" if t["value"] is None else f"{t['value']:.4g}"
        if t.get("values"):  # a multi-objective study's: * on the Pareto front
            value = "/".join(f"{v:.4g}" for v in t["values"]) + (" *" if t.get("pareto") else "")
        params = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in t["params"].items())
        print(f"{t['number']:>5}  {t['state']:<9} {t['job_id'] or '':>5} {t['steps']:>6} {value:>10}  {params}")
    if status["best"]:
        b = status["best"]
        print(f"best: trial {b['number']} (job {b['job_id']}) {spec['objective']}={b['value']:.4g}")
    if status.get("pareto"):
        print(f"Pareto front (*): trials {', '.join(map(str, status['pareto']))}")


def _objectives(spec: dict) -> str:
    if spec.get("objectives"):
        return ", ".join(f"{o} ({d})" for o, d in zip(spec["objectives"], spec.get("directions") or [], strict=False))
    return f"{spec['objective']} ({spec['direction']})"


def _cmd_status(args: argparse.Namespace) -> int:
    from ptmlab import studies

    with _session(args) as s:
        status = studies.study_status(s, args.study_id, url=_url(args))
    print(json.dumps(status, indent=2)) if args.json else _print_status(status)
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from ptmlab.db import Study

    with _session(args) as s:
        rows = s.scalars(sa.select(Study).order_by(Study.created_at.desc())).all()
    for study in rows:
        print(
            f"{study.id}  {study.status:<8} {study.spec.get('stage')}  "
            f"{study.spec.get('objective') or ','.join(study.spec.get('objectives') or [])}  {study.name or ''}"
        )
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    from ptmlab import studies

    with _session(args) as s:
        studies.stop_study(s, args.study_id, url=_url(args))
    print(f"study {args.study_id}: stopped (queued trials withdrawn, running ones stopped)")
    return 0


def _cmd_resume(args: argparse.Namespace) -> int:
    from ptmlab import studies

    with _session(args) as s:
        studies.resume_study(s, args.study_id, url=_url(args), driver_id="cli")
    print(f"study {args.study_id}: running again")
    return 0


def register(sub) -> None:
    study = sub.add_parser("study", help="hyperparameter studies: Optuna trials as queued jobs")
    verbs = study.add_subparsers(dest="study_command", required=True)
    create = verbs.add_parser("create", help="check a study and queue its first trials")
    create.add_argument(
        "overrides", nargs="*", help="Hydra overrides; interval(a,b)/choice(...)/range(...) are searched"
    )
    create.add_argument("--name")
    create.add_argument("--stage", required=True)
    create.add_argument("--objective", help="a metric reported at each validation")
    create.add_argument("--direction", choices=("maximize", "minimize"))
    create.add_argument("--objectives", help="several summary fields, comma-separated (a multi-objective study)")
    create.add_argument("--directions", help="one per objective, comma-separated: maximize,minimize")
    create.add_argument("--sampler", choices=("tpe", "random", "grid", "cmaes", "nsga2"))
    create.add_argument("--pruner", choices=("none", "asha", "hyperband", "median"))
    create.add_argument("--min-resource", dest="min_resource", type=int)
    create.add_argument("--reduction-factor", dest="reduction_factor", type=int)
    create.add_argument("--n-trials", dest="n_trials", type=int)
    create.add_argument("--n-parallel", dest="n_parallel", type=int)
    create.add_argument("--max-wall-s", dest="max_wall_s", type=float, help="wall-clock budget")
    create.add_argument("--max-steps", dest="max_steps", type=int, help="budget of training steps over all trials")
    create.add_argument("--seed", type=int, help="the sampler's seed")
    create.add_argument("--queue")
    create.add_argument("--priority", type=int)
    create.add_argument("--gpus", type=int)
    create.add_argument("--timeout-s", dest="timeout_s", type=float)
    create.add_argument("--json", action="store_true")
    create.set_defaults(func=_cmd_create)
    for verb, func, text in (
        ("status", _cmd_status, "a study's trials and best"),
        ("stop", _cmd_stop, "stop a study"),
        ("resume", _cmd_resume, "resume a stopped study"),
    ):
        p = verbs.add_parser(verb, help=text)
        p.add_argument("study_id")
        if verb == "status":
            p.add_argument("--json", action="store_true")
        p.set_defaults(func=func)
    p = verbs.add_parser("list", help="studies, newest first")
    p.set_defaults(func=_cmd_list)
    for p in verbs.choices.values():
        p.add_argument("--database-url", dest="database_url", default=None)

"""`ptmlab run` (one job in this process) and `ptmlab demo`."""

from __future__ import annotations

import argparse


def _cmd_run(args: argparse.Namespace) -> int:
    from ptmlab.run import main as run_main

    run_main(args.overrides)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from ptmlab.demo import run_demo

    return run_demo(steps=args.steps)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run one job in this process: ptmlab run stage=pretrain ...")
    p.add_argument("overrides", nargs=argparse.REMAINDER, help="Hydra overrides")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser(
        "demo", help="the research loop end to end on the embedded default (pretrain, fine-tune, compress, probe)"
    )
    p.add_argument("--steps", type=int, default=300, help="pre-training steps per model")
    p.set_defaults(func=_cmd_demo)

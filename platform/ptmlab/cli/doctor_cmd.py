"""`ptmlab doctor`: check Python, torch and its device, the database, MLflow, data, disk (ptmlab.doctor)."""

from __future__ import annotations

import argparse


def _cmd_doctor(args: argparse.Namespace) -> int:
    from ptmlab.doctor import run_doctor

    return run_doctor()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check Python, torch and its device, the database, MLflow, data, disk")
    p.set_defaults(func=_cmd_doctor)

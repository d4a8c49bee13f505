"""`ptmlab` command line.

Each sub-command family lives in its own module under ptmlab/cli/ with a
`register(subparsers)` function; COMMAND_MODULES lists them. Modules import their heavy
dependencies inside the command functions so `ptmlab --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ptmlab.errors import ConfigError, PtmlabError

COMMAND_MODULES = [
    "ptmlab.cli.run_cmd",
    "ptmlab.cli.results_cmds",
    "ptmlab.cli.queue_cmds",
    "ptmlab.cli.doctor_cmd",
    "ptmlab.cli.up_cmd",
    "ptmlab.cli.api_cmds",
    "ptmlab.cli.sweep_cmd",
    "ptmlab.cli.slurm_cmds",
    "ptmlab.cli.cache_cmds",
    "ptmlab.cli.study_cmds",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ptmlab", description="Experiments on pre-trained LMs.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _check_settings() -> None:
    """Every command reads the PTMLAB_* settings, most of them at import somewhere: a bad one
    (a token of only spaces) is one line naming the variable, not a traceback."""
    from pydantic import ValidationError

    from ptmlab.settings import describe_settings_error, get_settings

    try:
        get_settings()
    except ValidationError as exc:
        raise ConfigError(describe_settings_error(exc)) from None


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_settings()
        code = args.func(args)
    except PtmlabError as exc:
        print(f"error[{exc.code}]: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(code or 0)

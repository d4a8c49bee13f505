"""`ptmlab results runs`: the runs table of the dashboard on the command line — any summary or
config key as a column (`--columns main_score,stage.lr`), filters (`--filter 'stage.epochs>=3'`),
a sort, and `--group-by stage.lr`: one row per value with mean ± std, n, min and max over its
runs, and whether that spread is over seeds or over runs of different configs. The numbers are
the view's (ptmlab.views.runs), so the page, `GET /api/v1/views/runs` and this command agree. An
unknown key is one line naming it, exit 2."""

from __future__ import annotations

import argparse
import sys

# The views are imported when the command runs: building the parser must not read the settings
# (ptmlab.cli.main names a bad setting in one line first).
FORMATS = ("table", "csv", "latex", "json")  # ptmlab.views.runs_export.FORMATS


def _keys(values: list[str] | None) -> list[str]:
    return [k.strip() for v in values or [] for k in v.split(",") if k.strip()]


def _cmd(args: argparse.Namespace) -> int:
    from ptmlab.db import session_scope
    from ptmlab.views.runs import runs_view

    group_by = _keys(args.group_by)
    columns = _keys(args.columns) or None
    with session_scope(args.database_url) as session:
        view = runs_view(
            session,
            kind=args.kind,
            filters=args.filter,
            sort=args.sort,
            order=args.order,
            columns=columns,
            limit=args.limit,
            group_by=group_by,
        )
    from ptmlab.views.runs_export import render

    sys.stdout.write(render(view, args.format))
    return 0


def register(results_sub: argparse._SubParsersAction) -> None:
    p = results_sub.add_parser(
        "runs",
        help="every result as a row; any summary or config key as a column, "
        "filter, sort or group (mean ± std over the group's runs)",
    )
    p.add_argument("--kind", default=None, help="only results of this stage (finetune, compress, probe ...)")
    p.add_argument("--columns", nargs="+", default=None, metavar="KEY", help="columns: main_score stage.lr ...")
    p.add_argument(
        "--filter",
        action="append",
        default=None,
        metavar="EXPR",
        help="<key><op><value>, op = != > >= < <= ~ (contains); repeat for several",
    )
    p.add_argument("--group-by", nargs="+", default=None, metavar="KEY", help="one row per value of these keys")
    p.add_argument("--sort", default="id", help="a column (grouped: by its mean)")
    p.add_argument("--order", choices=("asc", "desc"), default="desc")
    p.add_argument("--limit", type=int, default=500, help="rows (or groups) shown, at most 500")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--database-url", default=None, help="default: the platform database (PTMLAB_DATABASE_URL)")
    p.set_defaults(func=_cmd)

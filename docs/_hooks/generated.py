"""mkdocs hook: the pages that are generated from the code at build time.

- `<!-- generated:cli -->` becomes every `ptmlab` command's `--help`, from `ptmlab.cli.build_parser`.
- `<!-- generated:bench-scripts -->` becomes the table of bench/*.py, each with its docstring's first line.
- `<!-- generated:recipes -->` becomes each recipe of conf/recipe/ with its values and their sources.
- `<!-- generated:api-routes -->` becomes the REST routes by tag, from the app's OpenAPI schema,
  which is also published beside the page as `reference/openapi.json`.

Both come from the objects the program itself uses, so the docs cannot drift from the code; both
are torch-free and build in about two seconds. The API app is built against a throw-away SQLite
database in a temporary folder: building the schema must not touch the user's PTMLAB_HOME.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import tempfile
from functools import cache
from pathlib import Path

from mkdocs.structure.files import File

CLI_MARK = "<!-- generated:cli -->"
API_MARK = "<!-- generated:api-routes -->"
BENCH_MARK = "<!-- generated:bench-scripts -->"
RECIPES_MARK = "<!-- generated:recipes -->"
ROOT = Path(__file__).resolve().parents[2]
OPENAPI_PATH = "reference/openapi.json"
HTTP_METHODS = ("get", "post", "put", "patch", "delete")


@cache
def openapi_schema() -> dict:
    from ptmlab.api.app import create_app
    from ptmlab.settings import Settings

    with tempfile.TemporaryDirectory(prefix="ptmlab-docs-") as home:
        settings = Settings(home=Path(home), database_url=f"sqlite:///{Path(home) / 'ptmlab.db'}")
        return create_app(settings).openapi()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_markdown() -> str:
    from ptmlab.cli import build_parser

    os.environ.setdefault("COLUMNS", "100")  # argparse wraps help to the terminal; one width for the page
    root = build_parser()
    parts = ["```text", root.format_help().rstrip(), "```", ""]

    def walk(parser: argparse.ArgumentParser, depth: int) -> None:
        for sub in _subcommands(parser).values():
            parts.extend([f"{'#' * depth} `{sub.prog}`", "", "```text", sub.format_help().rstrip(), "```", ""])
            walk(sub, depth + 1)

    walk(root, 2)
    return "\n".join(parts)


def _cell(text: str) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def api_markdown() -> str:
    schema = openapi_schema()
    by_tag: dict[str, list[tuple[str, str, str]]] = {}
    for path, item in schema["paths"].items():
        for method in HTTP_METHODS:
            op = item.get(method)
            if op is None:
                continue
            summary = op.get("summary") or ""
            description = (op.get("description") or "").split("\n\n")[0]
            text = summary if not description or description == summary else f"{summary}: {description}"
            for tag in op.get("tags") or ["other"]:
                by_tag.setdefault(tag, []).append((method.upper(), path, _cell(text)))
    parts = []
    for tag in sorted(by_tag):
        parts += [f"### {tag}", "", "| method | path | what it does |", "|---|---|---|"]
        parts += [f"| {method} | `{path}` | {text} |" for method, path, text in by_tag[tag]]
        parts.append("")
    return "\n".join(parts)


def bench_markdown() -> str:
    rows = ["| script | what it measures |", "|---|---|"]
    for script in sorted((ROOT / "bench").glob("*.py")):
        doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
        first = doc.split("\n\n")[0]
        rows.append(f"| `bench/{script.name}` | {_cell(first)} |")
    return "\n".join(rows) + "\n"


def on_files(files, config):
    files.append(File.generated(config, OPENAPI_PATH, content=json.dumps(openapi_schema(), indent=2)))
    return files


def recipes_markdown() -> str:
    """Each conf/recipe/*.yaml: what it is for (its header comment), then a row per key it sets with
    the value and the comment that names its source (a key without one: the source of the key above)."""
    out = []
    for path in sorted((ROOT / "conf" / "recipe").glob("*.yaml")):
        header, rows, parents, extends, sourced = [], [], [], "", ""
        for line in path.read_text().splitlines():
            if line.startswith("#"):
                header.append(line.lstrip("# ").strip())
                continue
            body, _, comment = line.partition("#")
            if not body.strip() or ":" not in body:
                continue
            indent = (len(body) - len(body.lstrip())) // 2
            key, _, value = body.strip().partition(":")
            del parents[indent:]
            if indent == 0 and key in ("base", "then"):
                extends += f" {'Extends' if key == 'base' else 'From random weights, then'} `{value.strip()}`."
            if value.strip() and indent >= 2:
                dotted = ".".join([*parents[1:], key])
                if comment.strip():
                    sourced = dotted
                rows.append((dotted, value.strip(), comment.strip() or f"as `{sourced}`"))
            elif not value.strip():
                parents.append(key)
        out.append(f"### `recipe={path.stem}`\n\n{' '.join(header)}{extends}\n")
        if rows:
            out += ["| key | value | source |", "|---|---|---|"]
            out += [f"| `{k}` | `{v}` | {_cell(c)} |" for k, v, c in rows]
        out.append("")
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_markdown())
    if API_MARK in markdown:
        markdown = markdown.replace(API_MARK, api_markdown())
    if BENCH_MARK in markdown:
        markdown = markdown.replace(BENCH_MARK, bench_markdown())
    if RECIPES_MARK in markdown:
        markdown = markdown.replace(RECIPES_MARK, recipes_markdown())
    return markdown

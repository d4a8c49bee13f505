"""The docs site builds offline with --strict (no broken link, include or reference), and the
README stays a first screen whose every relative link leads to a file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 200
# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis.
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)[^)]*\)")


def relative_links(markdown: str) -> list[str]:
    without_code = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    targets = [m.group(1) for m in MARKDOWN_LINK.finditer(without_code)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def test_readme_is_a_first_screen_whose_links_resolve():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    links = relative_links(readme)
    assert "docs/getting-started.md" in links and "ARCHITECTURE.md" in links
    missing = [t for t in links if not (ROOT / unquote(t.split("#", 1)[0])).is_file()]
    assert not missing, f"README links to files that do not exist: {missing}"


def test_relative_links_finder_sees_what_a_broken_link_looks_like():
    links = relative_links(
        '[a](docs/nope.md) ![s](docs/s.png "t") [w](https://x.org) [h](#top)\n```\n[c](in/code.md)\n```\n'
    )
    assert links == ["docs/nope.md", "docs/s.png"]


def test_docs_site_builds_offline_with_strict(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # The generated pages hold what their sources say: the declarations, the routes, the commands.
    config_page = (site / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    assert "LoRAParams" in config_page and "target_modules" in config_page
    api_page = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "/api/v1/jobs/{job_id}/cancel" in api_page
    assert (site / "reference" / "openapi.json").stat().st_size > 10_000
    assert "ptmlab study create" in (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "The two halves" in (site / "architecture" / "index.html").read_text(encoding="utf-8")
    # Offline: no page loads a script, style sheet or font from another host.
    external = [
        page.relative_to(site)
        for page in site.rglob("*.html")
        if re.search(r"<(script|link)[^>]+(src|href)=\"https?://", page.read_text(encoding="utf-8"))
    ]
    assert not external, f"pages that load from the network: {external}"


def readme_commands(markdown: str) -> list[list[str]]:
    """Each `.venv/bin/ptmlab ...` line of the README's code blocks, as its words."""
    import shlex

    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", markdown, flags=re.DOTALL)
    lines = [ln.strip() for block in blocks for ln in block.splitlines()]
    return [shlex.split(ln)[1:] for ln in lines if ln.startswith(".venv/bin/ptmlab ")]


def test_every_readme_command_still_works(tmp_path):
    """What each README command does first, without its long part: `run` composes and checks its
    config (what ptmlab run refuses before any work), `sweep --dry-run` expands and composes every
    job, `results` reads an empty database, `up --help` parses (tests/platform/
    test_worker_pretrain_and_up.py starts `ptmlab up` for real; tests/e2e/test_demo.py runs `make demo`)."""
    from ptmlab.config import compose_config

    commands = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert [c[0] for c in commands] == ["run", "up", "sweep", "results"], commands
    from ptmlab.db import dispose_engines, migrate

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)  # `ptmlab up`, the command before, creates it
    dispose_engines()
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path), "PTMLAB_DATABASE_URL": url}
    env.pop("MLFLOW_TRACKING_URI", None)
    for words in commands:
        if words[0] == "run":
            compose_config(words[1:])
            continue
        if words[0] == "sweep":
            words = [w for w in words if w != "--wait"] + ["--dry-run"]
        elif words[0] == "up":
            words = [*words, "--help"]
        proc = subprocess.run(
            [sys.executable, "-m", "ptmlab.cli", *words], env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, (words, proc.stdout[-1500:], proc.stderr[-1500:])
        if words[0] == "sweep":
            assert proc.stdout.count("seed=") >= 3, proc.stdout

"""`ptmlab cache list | prune`: the probing activation cache (`<PTMLAB_HOME>/cache/activations/`,
written by lightning_modules/probing/activations.py). Torch-free: each entry's `manifest.json`
says what it holds (model, data, alignment, layers, sentences, size, complete, last used).

    ptmlab cache list                       entries, newest use first, and the total size
    ptmlab cache prune --older-than 30      entries not used for 30 days
    ptmlab cache prune --max-size 20G       least recently used entries until the total fits
    ptmlab cache prune --incomplete         extractions that were killed and never resumed
    ptmlab cache prune --all [--dry-run]

An entry an extraction holds (its lock taken) is never removed.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import shutil
import sys
import time
from pathlib import Path

from ptmlab.errors import ConfigError
from ptmlab.sizes import size_text

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def activation_root(cache_dir: str | None) -> Path:
    if cache_dir:
        return Path(cache_dir) / "activations"
    from ptmlab.settings import get_settings

    return get_settings().home / "cache" / "activations"


def entry_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def read_entries(root: Path) -> list[dict]:
    entries: list[dict] = []
    if not root.is_dir():
        return entries
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        manifest = {}
        try:
            manifest = json.loads((folder / "manifest.json").read_text())
        except (OSError, json.JSONDecodeError):
            pass  # killed before its first manifest: an incomplete entry
        shards_done = len(list(folder.glob("shard_*.safetensors")))
        entries.append(
            {
                "key": folder.name,
                "folder": folder,
                "model": manifest.get("model", "?"),
                "data": manifest.get("data", "?"),
                "alignment": manifest.get("alignment", "?"),
                "sentences": manifest.get("sentences"),
                "layers": manifest.get("num_layers"),
                "shards": f"{shards_done}/{manifest.get('shards', '?')}",
                "complete": bool(manifest.get("complete")),
                "size": entry_size(folder),
                "last_used": manifest.get("last_used") or manifest.get("created") or folder.stat().st_mtime,
            }
        )
    return entries


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1] if text and text[-1] in UNITS else ""
    try:
        return int(float(text[: len(text) - len(unit)]) * UNITS[unit])
    except ValueError:
        raise ConfigError(f"--max-size={text!r}: expected a size like 500M or 20G") from None


def is_locked(folder: Path) -> bool:
    lock = folder / ".lock"
    if not lock.exists():
        return False
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def _cmd_list(args: argparse.Namespace) -> int:
    entries = sorted(read_entries(activation_root(args.cache_dir)), key=lambda e: -e["last_used"])
    if args.json:
        print(
            json.dumps([{k: (str(v) if isinstance(v, Path) else v) for k, v in e.items()} for e in entries], indent=1)
        )
        return 0
    header = ["key", "model", "data", "align", "sentences", "layers", "shards", "complete", "size", "last used"]
    rows = [
        [
            e["key"],
            str(e["model"]),
            str(e["data"]),
            str(e["alignment"]),
            str(e["sentences"]),
            str(e["layers"]),
            e["shards"],
            "yes" if e["complete"] else "no",
            size_text(e["size"]),
            time.strftime("%Y-%m-%d %H:%M", time.localtime(e["last_used"])),
        ]
        for e in entries
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    for row in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print(f"{len(entries)} entries, {size_text(sum(e['size'] for e in entries))} in {activation_root(args.cache_dir)}")
    return 0


def choose_pruned(
    entries: list[dict],
    *,
    all_: bool,
    older_than_days: float | None,
    max_size: int | None,
    incomplete: bool,
    now: float | None = None,
) -> list[dict]:
    now = time.time() if now is None else now
    chosen = {
        e["key"]
        for e in entries
        if all_
        or (incomplete and not e["complete"])
        or (older_than_days is not None and now - e["last_used"] > older_than_days * 86400)
    }
    if max_size is not None:
        total = sum(e["size"] for e in entries if e["key"] not in chosen)
        for e in sorted(entries, key=lambda e: e["last_used"]):  # least recently used first
            if total <= max_size:
                break
            if e["key"] not in chosen:
                chosen.add(e["key"])
                total -= e["size"]
    return [e for e in entries if e["key"] in chosen]


def _cmd_prune(args: argparse.Namespace) -> int:
    if not (args.all or args.incomplete or args.older_than is not None or args.max_size is not None):
        raise ConfigError(
            "ptmlab cache prune: say what to remove (--all, --incomplete, --older-than DAYS, --max-size SIZE)"
        )
    entries = read_entries(activation_root(args.cache_dir))
    pruned = choose_pruned(
        entries,
        all_=args.all,
        older_than_days=args.older_than,
        max_size=parse_size(args.max_size) if args.max_size else None,
        incomplete=args.incomplete,
    )
    freed = 0
    for e in pruned:
        if is_locked(e["folder"]):
            print(f"skipped {e['key']} (an extraction holds it)", file=sys.stderr)
            continue
        if not args.dry_run:
            shutil.rmtree(e["folder"], ignore_errors=True)
        freed += e["size"]
        print(
            f"{'would remove' if args.dry_run else 'removed'} {e['key']} {e['model']} {e['data']} {size_text(e['size'])}"
        )
    print(f"{'would free' if args.dry_run else 'freed'} {size_text(freed)}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="the probing activation cache: list, prune")
    cache_sub = p.add_subparsers(dest="cache_command", required=True)
    lst = cache_sub.add_parser("list", help="cached activations and their sizes")
    lst.add_argument("--json", action="store_true")
    prune = cache_sub.add_parser("prune", help="remove cached activations")
    prune.add_argument("--all", action="store_true")
    prune.add_argument("--incomplete", action="store_true", help="extractions killed and never resumed")
    prune.add_argument("--older-than", type=float, default=None, metavar="DAYS", help="not used for DAYS days")
    prune.add_argument("--max-size", default=None, metavar="SIZE", help="keep the most recently used up to SIZE")
    prune.add_argument("--dry-run", action="store_true")
    for q, func in ((lst, _cmd_list), (prune, _cmd_prune)):
        q.add_argument("--cache-dir", default=None, help="default: <PTMLAB_HOME>/cache")
        q.set_defaults(func=func)

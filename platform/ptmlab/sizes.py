"""Byte sizes as people read them, in binary units: the cache listing (`ptmlab cache`) and the
leaderboard's per-task delta column show sizes the same way."""

from __future__ import annotations


def size_text(n: float) -> str:
    """1536 -> "1.5 KiB", 300_000 -> "293.0 KiB", 512 -> "512 B"."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)

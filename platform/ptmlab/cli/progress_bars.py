"""Job progress as text: one line per job (name, bar, step/total, loss, ETA), for `--wait`,
`ptmlab status`, the Hydra launcher's `wait=true` and `make demo`. Torch-free.

On a terminal the lines are redrawn in place; into a file or a pipe a job's line is printed again
only when its status changes or it moved on by a tenth of its total (a log stays short).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

BAR_WIDTH = 20


def _seconds(s: float | None) -> str:
    if s is None:
        return ""
    s = max(0, round(s))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _loss(metrics: dict[str, Any]) -> str:
    if "train/loss" in metrics:
        return f"loss {metrics['train/loss']:.4g}"
    for key, value in metrics.items():
        if key.startswith("train/") and "loss" in key:
            return f"{key[6:]} {value:.4g}"
    return ""


def progress_text(progress: dict[str, Any] | None, status: str) -> str:
    """`[######--------------] 120/250 loss 0.412 ETA 1m08s` (as much as the progress says)."""
    if not progress or progress.get("step") is None:
        return ""
    step, total = int(progress["step"]), progress.get("total_steps")
    parts = []
    if total:
        done = min(1.0, step / total)
        filled = round(done * BAR_WIDTH)
        parts.append(f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {step}/{total}")
    else:
        parts.append(f"step {step}")
    if loss := _loss(progress.get("metrics") or {}):
        parts.append(loss)
    if status == "running":
        if progress.get("eta_s") is not None:
            parts.append(f"ETA {_seconds(progress['eta_s'])}")
        if progress.get("phase") not in (None, "training"):
            parts.append(str(progress["phase"]))
    return " ".join(parts)


def job_line(job: dict[str, Any], name_width: int = 24) -> str:
    name = (job.get("name") or f"{job['stage']}")[:name_width]
    return f"{job['id']:>5} {name:<{name_width}} {job['status']:<9} {progress_text(job.get('progress'), job['status'])}".rstrip()


class ProgressBoard:
    """Draws the lines of a set of jobs, again and again, as their state changes."""

    def __init__(self, out: TextIO | None = None, *, tty: bool | None = None):
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self.drawn = 0  # lines drawn last time (terminal)
        self.last: dict[int, tuple[str, int]] = {}  # job id -> (status, tenth of total) printed (file)

    def draw(self, jobs: list[dict[str, Any]]) -> None:
        lines = [job_line(j) for j in jobs]
        if self.tty:
            if self.drawn:
                self.out.write(f"\x1b[{self.drawn}F")  # back to the first line drawn
            self.out.write("".join(f"\x1b[2K{line}\n" for line in lines))
            self.drawn = len(lines)
        else:
            for job, line in zip(jobs, lines):
                p = job.get("progress") or {}
                tenth = int(10 * p["step"] / p["total_steps"]) if p.get("total_steps") and p.get("step") else -1
                key = (job["status"], tenth)
                if self.last.get(job["id"]) != key:
                    self.last[job["id"]] = key
                    self.out.write(f"[{time.strftime('%H:%M:%S')}] {line}\n")
        self.out.flush()

"""What makes two runs the same experiment: the hash of the resolved config a stage ran, without
the keys that only say where and when it ran. A stage records it in summary.json (`config_hash`);
the leaderboard identifies a re-run by it plus the seed, never by the keys it displays, so two
different configurations that share a seed and the displayed keys both stay visible."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

# Top-level keys that differ between re-runs of one experiment: where it ran (paths, the MLflow
# store and job id), its name and labels, the seed (a run's identity is (config_hash, seed)),
# resuming and checkpoint cadence, and Hydra's own node.
RUN_ONLY_KEYS = frozenset({"hydra", "paths", "tracking", "run_dir", "run_name", "tags", "seed", "resume",
                           "checkpoint_every_n_steps"})


def config_hash(resolved: dict[str, Any]) -> str:
    """A short, stable hash of a resolved config (a plain dict, interpolations resolved)."""
    kept = {k: v for k, v in resolved.items() if k not in RUN_ONLY_KEYS}
    text = json.dumps(kept, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def overrides_but_seed(overrides: Iterable[str]) -> tuple[str, ...]:
    """A job's overrides without `seed=` (spaces around the key too, as Hydra reads it): jobs equal
    in the rest compose to the same config, so a sweep or pipeline composes each such group once."""
    return tuple(o for o in overrides if not ("=" in o and o.split("=", 1)[0].strip() == "seed"))

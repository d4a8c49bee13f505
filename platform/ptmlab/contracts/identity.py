"""What makes two runs the same experiment: the hash of the resolved config a stage ran, without
the keys that only say where and when it ran. A stage records it in summary.json (`config_hash`);
the leaderboard identifies a re-run by it plus the seed, never by the keys it displays, so two
different configurations that share a seed and the displayed keys both stay visible."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from ptmlab.contracts.secrets import redact_url_passwords

# Top-level keys that differ between re-runs of one experiment: where it ran (paths, the MLflow
# store and job id), its name and labels, the seed (a run's identity is (config_hash, seed)),
# resuming and checkpoint cadence, and Hydra's own node.
RUN_ONLY_KEYS = frozenset(
    {"hydra", "paths", "tracking", "run_dir", "run_name", "tags", "seed", "resume", "checkpoint_every_n_steps"}
)


# Not hashed either: which recipe supplied a value and where each came from (ptmlab.recipes) say how
# a config was written, not what ran; the values themselves are in their own keys.
PROVENANCE_KEYS = frozenset({"recipe"})


def config_hash(resolved: dict[str, Any]) -> str:
    """A short, stable hash of a resolved config (a plain dict, interpolations resolved)."""
    kept = {k: v for k, v in resolved.items() if k not in RUN_ONLY_KEYS | PROVENANCE_KEYS}
    text = json.dumps(kept, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


Scalar = str | int | float | bool | None


def config_params(resolved: dict[str, Any], *, run_keys: bool = False) -> dict[str, Scalar]:
    """The resolved config as one flat dict of dotted keys (`stage.lr`, `model.name`), without the
    keys that only say where and when a run ran: what the runs table, the leaderboard and the
    sweep pages group and filter by. Lists of scalars are joined with ", "; other lists (a corpus's
    sources, a pipeline's nodes) and `_target_` paths are left out. `run_keys`: those keys too
    (seed, resume, paths ...; Hydra's node aside), as the run's MLflow params hold them: one
    flattening for both, so a key reads the same in MLflow and on the dashboard."""
    out: dict[str, Scalar] = {}

    def walk(node: Any, prefix: str) -> None:
        for key, value in node.items():
            name = f"{prefix}{key}"
            if str(key).startswith("_"):
                continue
            if isinstance(value, dict):
                walk(value, f"{name}.")
            elif isinstance(value, list):
                if all(isinstance(x, str | int | float | bool) for x in value):
                    out[name] = ", ".join(str(x) for x in value)
            elif isinstance(value, str):
                out[name] = redact_url_passwords(value)  # a database URL in a config never reaches a results row
            elif value is None or isinstance(value, int | float | bool):
                out[name] = value
            else:
                out[name] = str(value)

    skipped = {"hydra"} if run_keys else RUN_ONLY_KEYS
    walk({k: v for k, v in resolved.items() if k not in skipped}, "")
    return out


def overrides_but_seed(overrides: Iterable[str]) -> tuple[str, ...]:
    """A job's overrides without `seed=` (spaces around the key too, as Hydra reads it): jobs equal
    in the rest compose to the same config, so a sweep or pipeline composes each such group once."""
    return tuple(o for o in overrides if not ("=" in o and o.split("=", 1)[0].strip() == "seed"))

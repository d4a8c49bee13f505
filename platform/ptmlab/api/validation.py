"""Checking remote submissions before they reach the queue (torch-free).

A worker runs whatever config a job composes to, so a remote caller must not be able to choose
code or files: no `_target_` anywhere (key, value, `+x._target_=`, `~` deletion), no `hydra.*` /
`hydra/` override (it controls the run folder, launcher and logging), no interpolations (they
could assemble either), and no path-like value outside the allowed roots (PTMLAB_HOME,
PTMLAB_DATA_DIR, extra roots). Then every job's overrides are composed with Hydra's compose API,
so an unknown group/option/key or an impossible combination is refused with Hydra's one line.

Sweeps are expanded with Hydra's own override grammar (`a=x,y`, `seed=range(0,3)`,
`choice(...)`), into the cross product of the discrete sweeps in the order given.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from ptmlab.errors import ConfigError, ForbiddenOverrideError

MAX_SWEEP_JOBS = 10_000

# Hydra's GlobalHydra is a process-wide singleton: API worker threads must compose one at a time.
_compose_lock = threading.Lock()


def _strip_prefix(key: str) -> str:
    return key.lstrip("+~").strip()


def _split(override: str) -> tuple[str, str | None]:
    if "=" not in override:
        return override.strip(), None
    key, value = override.split("=", 1)
    return key.strip(), value.strip()


def allowed_roots(settings, extra: Iterable[str | Path] = ()) -> list[Path]:
    roots: list[Path] = [Path(settings.home)]
    if settings.data_dir:
        roots.append(Path(settings.data_dir))
    env = os.environ.get("PTMLAB_API_ALLOWED_ROOTS", "")
    roots += [Path(p) for p in env.split(os.pathsep) if p.strip()]
    roots += [Path(p) for p in extra]
    return [r.expanduser().resolve() for r in roots]


def _leaves(value) -> Iterable[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(k)
            yield from _leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)
    elif value is not None:
        yield str(value)


def _value_parts(override: str) -> list[str]:
    """Every string a value holds (list and dict elements, each choice of a sweep), by Hydra's grammar."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        (parsed,) = OverridesParser.create().parse_overrides([override])
    except HydraException as exc:
        raise ConfigError(f"override {override!r}: {str(exc).splitlines()[0]}") from None
    if parsed.is_sweep_override():
        if not parsed.is_discrete_sweep():
            return []
        return [leaf for v in parsed.sweep_iterator() for leaf in _leaves(v)]
    return list(_leaves(parsed.value()))


def _is_path_like(part: str) -> bool:
    if part.startswith(("/", "~", "\\")) or part.startswith("file:"):
        return True
    return ".." in Path(part.replace("\\", "/")).parts


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def check_override_allowed(override: str, roots: Sequence[Path]) -> None:
    """Raise ForbiddenOverrideError (one line naming the override) when a remote caller may not set it."""
    if not isinstance(override, str):
        raise ConfigError(f"override {override!r} is not a string")
    if "\x00" in override:
        raise ConfigError(f"override {override!r} contains a NUL character")
    if "_target_" in override:
        raise ForbiddenOverrideError(f"override {override!r}: `_target_` may not be set through the API")
    key, value = _split(override)
    parts = re.split(r"[./@]", _strip_prefix(key))
    if "hydra" in parts:
        raise ForbiddenOverrideError(f"override {override!r}: `hydra` settings may not be set through the API")
    if value is None:
        return
    if "${" in value:
        raise ForbiddenOverrideError(f"override {override!r}: interpolations (${{...}}) may not be used through the API")
    for part in _value_parts(override):
        if not _is_path_like(part):
            continue
        if part.startswith("file:"):
            part = part.removeprefix("file://").removeprefix("file:")
        path = Path(os.path.expanduser(part))
        resolved = path.resolve() if path.is_absolute() else (roots[0] / path).resolve() if roots else path
        if not _inside(resolved, roots):
            raise ForbiddenOverrideError(
                f"override {override!r}: path {part!r} is outside the allowed roots "
                f"({', '.join(str(r) for r in roots)})"
            )


def check_overrides_allowed(overrides: Sequence[str], roots: Sequence[Path]) -> None:
    for o in overrides:
        check_override_allowed(o, roots)


def expand_sweep(overrides: Sequence[str]) -> list[list[str]]:
    """The cross product of the sweep overrides (Hydra's grammar), one override list per job."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if isinstance(overrides, str):
        raise ConfigError("overrides must be a list of strings, not one string")
    parser = OverridesParser.create()
    axes: list[list[str]] = []
    for text in overrides:
        try:
            (parsed,) = parser.parse_overrides([text])
        except HydraException as exc:
            raise ConfigError(f"override {text!r}: {str(exc).splitlines()[0]}") from None
        if not parsed.is_sweep_override():
            axes.append([text])
            continue
        if not parsed.is_discrete_sweep():
            raise ConfigError(f"override {text!r}: only discrete sweeps (a,b / range / choice) can be queued")
        key = parsed.get_key_element()
        values = list(parsed.sweep_string_iterator())
        if not values:
            raise ConfigError(f"override {text!r}: the sweep is empty")
        axes.append([f"{key}={v}" for v in values])
    count = 1
    for axis in axes:
        count *= len(axis)
    if count > MAX_SWEEP_JOBS:
        raise ConfigError(f"the sweep expands to {count} jobs; at most {MAX_SWEEP_JOBS} per submission")
    return [list(combo) for combo in itertools.product(*axes)]


def compose_job(overrides: Sequence[str], *, stage: str | None = None, seed: int | None = None) -> None:
    """Compose one job's config (ConfigError with Hydra's one line when it does not compose)."""
    from ptmlab.config import compose_config

    full = [*([f"stage={stage}"] if stage else []), *([f"seed={seed}"] if seed is not None else []), *overrides]
    with _compose_lock:
        compose_config(full)


def validate_job(overrides: Sequence[str], roots: Sequence[Path], *, stage: str | None = None,
                 seed: int | None = None) -> None:
    check_overrides_allowed(overrides, roots)
    if stage is not None:
        check_override_allowed(f"stage={stage}", roots)
    compose_job(overrides, stage=stage, seed=seed)


def validate_sweep_jobs(jobs: Sequence[Sequence[str]], roots: Sequence[Path], *, stage: str | None = None,
                        check_allowed: bool = True) -> None:
    """Every expanded job must compose; a refusal names the combination that failed.
    Seeds do not change what composes, so combinations differing only in `seed=` compose once."""
    seen: set[tuple[str, ...]] = set()
    for combo in jobs:
        if check_allowed:
            check_overrides_allowed(combo, roots)
        key = tuple(o for o in combo if _split(o)[0] != "seed")
        if key in seen:
            continue
        seen.add(key)
        try:
            compose_job(combo, stage=stage)
        except ConfigError as exc:
            raise ConfigError(f"combination [{' '.join(combo)}]: {exc}") from None

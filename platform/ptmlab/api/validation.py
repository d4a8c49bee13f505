"""Checking remote submissions before they reach the queue (torch-free).

A worker runs whatever config a job composes to, so a remote caller must not be able to choose
code or files: no override may set, append, force-set, replace or delete a key that selects code
(`ptmlab.code_keys`: `_target_`, `stage.entry`, Hydra's `_partial_`/`_args_`/... found in conf/),
no `@package` move, no `hydra.*` / `hydra/` override (run folder, launcher, callbacks), no
interpolations (they could assemble either), and no path-like value outside the allowed roots
(PTMLAB_HOME, PTMLAB_DATA_DIR, extra roots). Then every job's overrides are composed with Hydra's
compose API and type-checked (ptmlab.config), so an unknown group/option/key, a wrong type or an
impossible combination is refused with one line.

Work per request is bounded: override counts and key lengths, sweep sizes counted from the parsed
sweeps (`range(0,10**9)` is refused by arithmetic, never listed), and a wall-clock budget for
composing a sweep's configs. Sweeps are expanded with Hydra's own override grammar (`a=x,y`,
`seed=range(0,3)`, `choice(...)`, `glob(...)`) into the cross product, in the order given.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from hydra.core.override_parser.types import ChoiceSweep, Glob, Override, RangeSweep

from ptmlab.code_keys import check_no_code_selection
from ptmlab.config import list_config_groups
from ptmlab.contracts.identity import overrides_but_seed
from ptmlab.errors import ConfigError, ForbiddenOverrideError, LimitExceededError

# Per-request bounds (also stated in the OpenAPI schema by ptmlab.api.schemas).
MAX_SWEEP_JOBS = 10_000
MAX_OVERRIDES = 200
MAX_KEY_CHARS = 200  # a key is also looked up as a config group folder: keep it a valid path
# Wall-clock budget for composing one request's configs; a sweep of thousands of distinct
# configs is refused (split it) instead of holding the compose lock for minutes.
VALIDATION_BUDGET_S = 30.0

# Hydra's GlobalHydra is a process-wide singleton: API worker threads must compose one at a time.
_compose_lock = threading.Lock()


def _split(override: str) -> tuple[str, str | None]:
    if "=" not in override:
        return override.strip(), None
    key, value = override.split("=", 1)
    return key.strip(), value.strip()


def allowed_roots(settings, extra: Iterable[str | Path] = ()) -> list[Path]:
    roots: list[Path] = [Path(settings.home)]
    if settings.data_dir:
        roots.append(Path(settings.data_dir))
    roots += settings.allowed_root_paths
    roots += [Path(p) for p in extra]
    return [r.expanduser().resolve() for r in roots]


def parse_override(override: str) -> Override:
    """One override by Hydra's grammar; a string it cannot parse is a ConfigError naming it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if not isinstance(override, str):
        raise ConfigError(f"override {override!r} is not a string")
    if "\x00" in override:
        raise ConfigError(f"override {override!r} contains a NUL character")
    try:
        (parsed,) = OverridesParser.create().parse_overrides([override])
    except HydraException as exc:
        raise ConfigError(f"override {override!r}: {_first_line(exc)}") from None
    except RecursionError:  # ANTLR recurses per nesting level of a value: `[[[[...]]]]`
        raise ConfigError(f"override {override[:80]!r}...: nested too deeply") from None
    if len(parsed.key_or_group) > MAX_KEY_CHARS:
        raise LimitExceededError(
            f"override key {parsed.key_or_group[:60]!r}... is {len(parsed.key_or_group):,} "
            f"characters; at most {MAX_KEY_CHARS}"
        )
    return parsed


def _first_line(exc: BaseException) -> str:
    return next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)


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


def _value_parts(parsed: Override) -> list[str]:
    """Every string a value holds (list and dict elements, each choice of a discrete sweep).
    Ranges hold numbers only and are never materialised here (`range(0,10**9)`)."""
    if parsed.is_sweep_override():
        value = parsed.value()
        if isinstance(value, ChoiceSweep):
            return [leaf for v in value.list for leaf in _leaves(v)]
        if isinstance(value, Glob):
            return [*value.include, *value.exclude]
        return []
    return list(_leaves(parsed.value()))


def _is_absolute(part: str) -> bool:
    return part.startswith(("/", "~", "\\", "file:"))


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


# Keys the platform sets for a job: where it keeps its files and which tracking store it writes to
# (the worker's configured one; a submitted `tracking.uri` would send the job's params, metrics
# and weights wherever the caller chose). `tracking.experiment` is only a name.
PLATFORM_KEYS = ("paths", "tracking", "run_dir")
SUBMITTABLE = ("tracking.experiment",)


def _check_not_platform_key(override: str, key: str) -> None:
    dotted = key.lstrip("+~").replace("/", ".")
    if dotted in SUBMITTABLE:
        return
    if dotted.split(".")[0] in PLATFORM_KEYS:
        raise ForbiddenOverrideError(
            f"override {override!r}: `{dotted}` is set by the worker that runs the job "
            f"(its configured folders and tracking store) and may not be set in a "
            f"submitted job"
        )


def check_path_value(part: str, roots: Sequence[Path], what: str) -> None:
    """A value that may be used as a path stays under the roots: an absolute one resolved (symlinks
    followed), a relative one resolved against the first root, the base a worker runs jobs in
    (PTMLAB_HOME), and never climbing out of wherever it is joined (`a/../../x`)."""
    if part.startswith("file:"):
        part = part.removeprefix("file://").removeprefix("file:")
    if not _is_absolute(part) and os.path.normpath(part.replace("\\", "/")).split("/")[0] == "..":
        raise ForbiddenOverrideError(f"{what}: path {part!r} climbs out of its folder (`..`)")
    path = Path(os.path.expanduser(part))
    try:
        resolved = path.resolve() if path.is_absolute() else (roots[0] / path).resolve() if roots else path
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a name too long
        raise ForbiddenOverrideError(f"{what}: path {part[:200]!r} does not resolve") from None
    if not _inside(resolved, roots):
        raise ForbiddenOverrideError(
            f"{what}: path {part!r} is outside the allowed roots ({', '.join(str(r) for r in roots)})"
        )


def check_override_allowed(override: str, roots: Sequence[Path]) -> None:
    """Raise ForbiddenOverrideError (one line naming the override) when a remote caller may not set it."""
    parsed = parse_override(override)
    check_no_code_selection(override, parsed)
    _check_not_platform_key(override, parsed.key_or_group)
    _key, value = _split(override)
    if value is None or parsed.is_delete():
        return
    if "${" in value:
        raise ForbiddenOverrideError(
            f"override {override!r}: interpolations (${{...}}) may not be used through the API"
        )
    # Any string value may reach a reader, a backbone reference or a folder: each is checked as a path.
    for part in _value_parts(parsed):
        check_path_value(part, roots, f"override {override!r}")


def check_overrides_allowed(overrides: Sequence[str], roots: Sequence[Path]) -> None:
    if len(overrides) > MAX_OVERRIDES:
        raise LimitExceededError(f"{len(overrides)} overrides; at most {MAX_OVERRIDES} per job")
    for o in overrides:
        check_override_allowed(o, roots)


def sweep_length(override: str, parsed: Override) -> int:
    """How many values a sweep override expands to, computed from its parsed form: a range's
    length by arithmetic, never by listing it."""
    value = parsed.value()
    if isinstance(value, RangeSweep):
        start, stop, step = value.start, value.stop, value.step
        if step == 0:
            raise ConfigError(f"override {override!r}: range step must not be 0")
        if not all(math.isfinite(x) for x in (start, stop, step)):
            raise ConfigError(f"override {override!r}: range bounds must be finite numbers")
        return max(0, math.ceil((stop - start) / step))
    if isinstance(value, ChoiceSweep):
        return len(value.list)
    if isinstance(value, Glob):
        return len(value.filter(list_config_groups().get(parsed.key_or_group, [])))
    raise ConfigError(f"override {override!r}: only discrete sweeps (a,b / range / choice / glob) can be queued")


def _sweep_values(override: str, parsed: Override) -> list[str]:
    value = parsed.value()
    if isinstance(value, Glob):
        return value.filter(list_config_groups().get(parsed.key_or_group, []))
    return list(parsed.sweep_string_iterator())


def expand_sweep(overrides: Sequence[str], max_jobs: int = MAX_SWEEP_JOBS) -> list[list[str]]:
    """The cross product of the sweep overrides (Hydra's grammar), one override list per job.
    The count is computed from the parsed sweeps first, so an oversized sweep is refused before
    a single value is listed."""
    if isinstance(overrides, str):
        raise ConfigError("overrides must be a list of strings, not one string")
    if len(overrides) > MAX_OVERRIDES:
        raise LimitExceededError(f"{len(overrides)} overrides; at most {MAX_OVERRIDES} per sweep")
    parsed_all = [(text, parse_override(text)) for text in overrides]
    count = 1
    for text, parsed in parsed_all:
        if parsed.is_sweep_override():
            n = sweep_length(text, parsed)
            if n == 0:
                raise ConfigError(f"override {text!r}: the sweep is empty")
            count *= n
            if count > max_jobs:
                raise LimitExceededError(
                    f"the sweep expands to at least {count:,} jobs ({text!r} has {n:,} values); "
                    f"at most {max_jobs:,} per submission"
                )
    axes: list[list[str]] = []
    for text, parsed in parsed_all:
        if not parsed.is_sweep_override():
            axes.append([text])
            continue
        key = parsed.get_key_element()
        axes.append([f"{key}={v}" for v in _sweep_values(text, parsed)])
    return [list(combo) for combo in itertools.product(*axes)]


class ValidationBudget:
    """The wall-clock budget of one request's validation; `check` between compositions."""

    def __init__(self, budget_s: float | None, what: str):
        self.budget_s, self.what = budget_s, what
        self.deadline = None if budget_s is None else time.monotonic() + budget_s

    def check(self, done: int, total: int) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise LimitExceededError(
                f"validating the {self.what} ran past its {self.budget_s:g} s budget after "
                f"{done:,} of {total:,} jobs; submit it in smaller parts"
            )


def compose_job(overrides: Sequence[str], *, stage: str | None = None, seed: int | None = None) -> None:
    """Compose one job's config (ConfigError with Hydra's one line when it does not compose)."""
    from ptmlab.config import compose_config

    full = [*([f"stage={stage}"] if stage else []), *([f"seed={seed}"] if seed is not None else []), *overrides]
    with _compose_lock:
        compose_config(full)


def compose_checked(overrides: Sequence[str], roots: Sequence[Path], *, stage: str | None):
    """The composed config of one job whose overrides pass the remote-submission checks (a study
    reads it: which metrics its stage reports; the submit form: the recipe it would train with)."""
    from ptmlab.config import compose_config

    check_overrides_allowed(overrides, roots)
    head = [f"stage={stage}"] if stage else []
    for override in head:
        check_override_allowed(override, roots)
    with _compose_lock:
        return compose_config([*head, *overrides])


def validate_job(
    overrides: Sequence[str], roots: Sequence[Path], *, stage: str | None = None, seed: int | None = None
) -> None:
    check_overrides_allowed(overrides, roots)
    if stage is not None:
        check_override_allowed(f"stage={stage}", roots)
    compose_job(overrides, stage=stage, seed=seed)


def validate_sweep_jobs(
    jobs: Sequence[Sequence[str]],
    roots: Sequence[Path],
    *,
    stage: str | None = None,
    check_allowed: bool = True,
    budget_s: float | None = VALIDATION_BUDGET_S,
) -> None:
    """Every expanded job must compose; a refusal names the combination that failed.
    Seeds do not change what composes, so combinations differing only in `seed=` compose once.
    `budget_s` bounds the wall-clock time (None: no bound, for a local user's own sweep)."""
    seen: set[tuple[str, ...]] = set()
    allowed: set[str] = set()  # a sweep repeats most overrides in every job: parse each string once
    budget = ValidationBudget(budget_s, "sweep")
    for done, combo in enumerate(jobs):
        budget.check(done, len(jobs))
        if check_allowed:
            if len(combo) > MAX_OVERRIDES:
                raise LimitExceededError(f"{len(combo)} overrides; at most {MAX_OVERRIDES} per job")
            for override in combo:
                if override not in allowed:
                    check_override_allowed(override, roots)
                    allowed.add(override)
        key = overrides_but_seed(combo)
        if key in seen:
            continue
        seen.add(key)
        try:
            compose_job(combo, stage=stage)
        except ConfigError as exc:
            raise ConfigError(f"combination [{' '.join(combo)}]: {exc}") from None

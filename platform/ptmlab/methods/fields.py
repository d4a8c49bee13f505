"""Building blocks of the declarations (ptmlab.methods) and the group node shapes
(ptmlab.config_schema): node base classes and strict field types whose errors read `expected ...`
(ptmlab.config_schema turns them into one line naming the key). They live here, in the torch-free
leaf that lightning_modules imports, because a declaration is built from them.

Values reach the schemas as Hydra typed them (`x=2` is an int, `x=2.0` a float, `x=abc` a
string), so the types are strict: an int field refuses "2", 1.5 and true; a float field takes an
int (`dropout=0`) but not a string or a bool; a bool takes only true/false.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# A cross-field message names keys relative to the node; `{node}` becomes its dotted path.
NODE = "{node}"


class Node(BaseModel):
    """A config node: strict types, no unknown key."""

    model_config = ConfigDict(strict=True, extra="forbid")


class OpenNode(BaseModel):
    """A node whose declared keys are typed but which also takes keys it does not declare."""

    model_config = ConfigDict(strict=True, extra="allow")


class TargetNode(Node):
    """A `_target_` node: the keys are the target's constructor arguments (those the config sets)."""

    target: str = Field(alias="_target_")


class AnyTarget(OpenNode):
    """A `_target_` this schema does not know (a local run pointing at its own class): only the
    target itself is typed, since its arguments cannot be known without importing it (and the
    API process never imports torch). The API refuses `_target_` overrides, so a remote
    submission always reaches a known target."""

    target: str = Field(alias="_target_")


# -- ranges -------------------------------------------------------------------------------------


def _show(bound: float) -> str:
    return f"{bound:g}" if isinstance(bound, float) else str(bound)


def in_range(
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    what: str = "a number",
) -> AfterValidator:
    """`lo <= v <= hi` (open ends with lo_open/hi_open); NaN and infinities are refused."""
    if lo is not None and hi is not None:
        expected = f"{what} in {'(' if lo_open else '['}{_show(lo)}, {_show(hi)}{')' if hi_open else ']'}"
    elif lo is not None:
        expected = f"{what} {'>' if lo_open else '>='} {_show(lo)}"
    else:
        expected = f"{what} {'<' if hi_open else '<='} {_show(hi)}"

    def check(value):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"expected {expected}")
        below = lo is not None and (value <= lo if lo_open else value < lo)
        above = hi is not None and (value >= hi if hi_open else value > hi)
        if below or above:
            raise ValueError(f"expected {expected}")
        return value

    return AfterValidator(check)


def _positive_int(value: int) -> int:
    if value <= 0:
        raise ValueError("expected a positive integer")
    return value


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("expected a non-empty string")
    return value


PositiveInt = Annotated[int, AfterValidator(_positive_int)]
NonNegativeInt = Annotated[int, in_range(0, what="an integer")]
PositiveFloat = Annotated[float, in_range(0.0, lo_open=True)]
NonNegativeFloat = Annotated[float, in_range(0.0)]
Dropout = Annotated[float, in_range(0.0, 1.0, hi_open=True)]  # 1.0 would drop everything
Probability = Annotated[float, in_range(0.0, 1.0)]
NonZeroProbability = Annotated[float, in_range(0.0, 1.0, lo_open=True)]
Fraction = Annotated[float, in_range(0.0, 1.0, lo_open=True, hi_open=True)]
WarmupRatio = Annotated[float, in_range(0.0, 1.0, hi_open=True)]
Name = Annotated[str, AfterValidator(_non_empty)]


def _is_target(value: dict) -> dict:
    if not isinstance(value.get("_target_"), str):
        raise ValueError("expected a node with a `_target_`")
    return value


# A `_target_` node inside a group node: ptmlab.config_schema validates it against the schema
# of its target (TARGETS) once the group node itself is valid.
TargetSlot = Annotated[dict[str, Any], AfterValidator(_is_target)]


def checked(fn, expected: str) -> AfterValidator:
    """A field of several shapes (`devices`: 1 | -1 | "0,1" | [0, 1]): `fn(value)` says whether
    it is valid; otherwise the error reads `expected <expected>`."""

    def check(value):
        if not fn(value):
            raise ValueError(f"expected {expected}")
        return value

    return AfterValidator(check)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and (not isinstance(value, float) or math.isfinite(value))
    )

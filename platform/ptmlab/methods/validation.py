"""One path from a declaration's validation error to the one line a user reads: the key, the value
given and what was expected (`adaptation.rank=0: expected a positive integer`). The compose-time
check of every config group (ptmlab.config_schema) and a method built from its declaration in code
(`declared`) both speak through it."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ValidationError

from ptmlab.contracts.errors import ConfigError
from ptmlab.methods.fields import NODE

MAX_ERRORS_SHOWN = 3


def declared(schema: type[BaseModel], values: dict[str, Any], path: str) -> Any:
    """`schema` validated from `values` (the node at `path`); ConfigError naming the bad keys."""
    errors = _validate(schema, values, path, set())
    if errors:
        raise ConfigError("; ".join(errors[:MAX_ERRORS_SHOWN]))
    return schema.model_validate(values)


def declared_in_code(method: Any, values: dict[str, Any], group: str) -> Any:
    """The declaration of `method` (an instance whose class names it, `declaration = ...`, and its
    `name`) validated from the values it was given as keywords in code, as a config node of `group`
    would be: one ConfigError line naming the key on a bad one."""
    target = f"{type(method).__module__}.{type(method).__qualname__}"
    node = {"_target_": target, **values}
    if "name" in method.declaration.model_fields:  # a group whose option files are named (not objective.module)
        node["name"] = method.name
    return declared(method.declaration, node, group)


TYPE_MESSAGES = {
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected a string",
    "list_type": "expected a list",
    "dict_type": "expected a mapping",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "finite_number": "expected a finite number",
}


def _validate(schema: type[BaseModel], data: dict, path: str, missing: set[str]) -> list[str]:
    try:
        schema.model_validate(data)
    except ValidationError as exc:
        return [m for e in exc.errors() if (m := _message(e, schema, path, missing))]
    return []


def _join(path: str, loc: tuple) -> str:
    for part in loc:
        path = f"{path}[{part}]" if isinstance(part, int) else f"{path}.{part}" if path else str(part)
    return path


def _message(err: Mapping[str, Any], schema: type[BaseModel], path: str, missing: set[str]) -> str | None:
    loc, kind = tuple(err["loc"]), err["type"]
    if loc and loc[-1] == "[key]":  # a mapping's key (mode_weights.<mode>, requires_data.<key>)
        expected = err.get("ctx", {}).get("expected", "")
        return f"{_join(path, loc[:-1])}: unknown key" + (
            f" (known: {expected.replace(' or ', ', ')})" if expected else ""
        )
    key = _join(path, loc)
    if kind == "missing":
        return None if key in missing else f"{key}: required key is missing"
    if kind == "extra_forbidden":
        known = _known_keys(schema, loc[:-1])
        return f"{key}: unknown key" + (f" (known: {', '.join(known)})" if known else "")
    if kind == "literal_error":
        text = f"expected one of {err['ctx']['expected'].replace(' or ', ', ')}"
    elif kind == "value_error":
        text = str(err["msg"]).removeprefix("Value error, ")
        if NODE in text:  # a cross-field check of the node at `key`: it names its keys itself
            return text.replace(NODE, key)
    else:
        text = TYPE_MESSAGES.get(kind, err["msg"])
    return f"{key}={_show(err['input'])}: {text}"


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _known_keys(schema: type[BaseModel], loc: tuple) -> list[str]:
    """The keys a node at `loc` inside `schema` takes (aliases as written in the config)."""
    current: Any = schema
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            fields = {f.alias or n: f for n, f in current.model_fields.items()}
            if part not in fields:
                return []
            current = fields[part].annotation
        else:  # dict[str, X] / list[X]: the element type
            args = typing.get_args(current)
            current = args[-1] if args else None
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(f.alias or n for n, f in current.model_fields.items())
    return []


def _unwrap(tp: Any) -> Any:
    """`X | None` and `Annotated[X, ...]` -> X."""
    while True:
        if typing.get_origin(tp) is Annotated:
            tp = typing.get_args(tp)[0]
            continue
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
            tp = args[0]
            continue
        return tp

"""JSON bodies for the views' responses without encoding the same data twice.

EncodedList(items, texts)   a view's long list (25,000 compression points) with each item's
                            JSON (UTF-8 bytes: `encode`), made once per item by the view's
                            fold and kept while the item is unchanged
json_body(view) -> bytes    the view as Starlette's JSONResponse encodes it, its EncodedList
                            values joined from their texts; the same view object again (a
                            cached view: a page polling) gets the bytes made the first time
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any


class EncodedList(list):
    """A list whose items' JSON (`texts`: UTF-8 bytes, same order) is already made."""

    def __init__(self, items: list, texts: list[bytes]):
        super().__init__(items)
        self.texts = texts


def dumps(value: Any) -> str:
    # Starlette's JSONResponse settings: the bytes are what `JSONResponse(view)` sends.
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


def encode(value: Any) -> bytes:
    """One item's JSON for an EncodedList."""
    return dumps(value).encode()


_BODIES = 16
_bodies: OrderedDict[int, tuple[dict, bytes]] = OrderedDict()
_lock = threading.Lock()


def json_body(view: dict[str, Any]) -> bytes:
    with _lock:
        hit = _bodies.get(id(view))
        if hit is not None and hit[0] is view:  # the object itself is held: its id is not reused meanwhile
            return hit[1]
    encoded = {k: v for k, v in view.items() if isinstance(v, EncodedList)}
    marks = {k: f"\x00encoded {i}\x00" for i, k in enumerate(encoded)}
    parts = [dumps({k: marks.get(k, v) for k, v in view.items()}).encode()]
    for k, v in encoded.items():  # each list's place in the rest, joined in one go below
        before, after = parts.pop().split(encode(marks[k]), 1)
        parts += [before, b"[", b",".join(v.texts), b"]", after]
    body = b"".join(parts)
    with _lock:
        _bodies[id(view)] = (view, body)
        while len(_bodies) > _BODIES:
            _bodies.popitem(last=False)
    return body

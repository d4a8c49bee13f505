"""Secrets out of anything shown or logged: one redaction for configs, overrides, errors and logs.

Shared by the platform (ptmlab.settings.redact adds the API token: job JSON, pages, views, logs,
the CLI) and the config a stage writes and logs to MLflow (lightning_modules/runtime/stage_run.py).
What it covers, each replaced by `***`:

- a URL's password, any character but whitespace and quotes (`/`, `:`, `#` and an unencoded `@`:
  the last `@` of the word ends it), an empty user name too: `postgresql+psycopg://u:***@db/x`,
  `redis://:***@cache`;
- the value of a secret key (`password`, `passwd`, `passphrase`, `secret`, `credentials`, `api_key`,
  `access_key`, `private_key`, `secret_key`, a bare `token` and the tokens of services: `api_token`,
  `access_token`, `HF_TOKEN`, ...) written `key=value` (query strings, env lines, Hydra overrides,
  libpq keyword DSNs, quoted or not), `key: value` (YAML: the rest of the line) or JSON (inside a
  line, `token: x` unquoted is prose: "needs an end token: the tokenizer has none");
- `Authorization:` headers and `Bearer <token>`.

Tokenizer keys are not secrets (`pad_token`, `max_tokens`, `tokenizer`): only the service token
names above and a key named just `token` are. Every pattern stays inside one line, so a log read a
line at a time is redacted as a whole file would be (ptmlab.joblog.read_log_file), and redacting
twice changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MASK = "***"

# Characters that end an unquoted value or URL password besides whitespace (quotes, backticks and
# angle brackets delimit it in logs, reprs and HTML).
_STOP = r"\s'\"`<>"
# After a URL's `scheme://`: the user name (maybe empty, maybe holding `@`) and the password's colon.
_URL_USER = re.compile(rf"[^{_STOP}:/]{{0,256}}:")
_WORD = re.compile(rf"[^{_STOP}]*")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_SERVICE_TOKENS = (
    r"api|auth|access|refresh|bearer|session|id|hf|hub|git(?:hub|lab)?|gh|oauth|tracking|private"
    r"|secret|personal_access|client|csrf|security|slack|wandb"
)
# A secret key: its last dotted component ends in a secret word; `token` only as a whole component
# or after a service name.
SECRET_KEY = (
    r"(?:[\w\-]+\.)*(?:"
    r"[\w\-]*(?:password|passwd|passphrase|secret|credentials?|api_?key|access_?key|private_?key|secret_?key)"
    rf"|(?:[\w\-]*[_\-])?(?:{_SERVICE_TOKENS})[_\-]?token|token)"
)
_QUOTED = r"(?P<q>['\"])(?P<quoted>(?:\\.|(?!(?P=q))[^\\\r\n])*)(?P=q)"
# Not a secret to hide: nothing, an unset value, a comment, a nested mapping or list, already hidden.
_NOT_A_VALUE = r"(?!(?:null|None|~)(?![^\s,;&}\]])|\*\*\*(?![^\s,;&}\]@])|[#{\[])"
# What follows a secret key (the key's closing quote, if quoted, then `=` or `:` and the value):
_YAML_VALUE = re.compile(  # on a YAML line, the whole rest of the line (a scalar may hold spaces)
    rf"(?P<kq>['\"])?[ \t]*:[ \t]+(?:{_QUOTED}|{_NOT_A_VALUE}(?P<secret>\S(?:[^\r\n]*\S)?))", re.IGNORECASE
)
# Inside a line `key: value` is a secret where the key is quoted (JSON, a dict's repr) or is not a
# token: prose says "needs an end token: the tokenizer has none".
_INLINE_VALUE = re.compile(
    rf"(?P<kq>['\"])?(?:[ \t]*=|(?(kq)[ \t]*:|(?<!token)[ \t]*:))[ \t]*"
    rf"(?:{_QUOTED}|{_NOT_A_VALUE}(?P<secret>[^{_STOP}&]+))",
    re.IGNORECASE,
)
_AUTHORIZATION_VALUE = re.compile(r"['\"]?[ \t]*[:=][ \t]*(?P<secret>[^\r\n]*[^\s'\"])")
_BEARER = re.compile(r"\bbearer[ \t]+(?P<secret>[\w\-.~+/]{8,}=*)")  # in the lower-cased text
_SECRET_KEY = re.compile(SECRET_KEY, re.IGNORECASE)
_KEY_CHARS = re.compile(r"[\w.\-]*")
_YAML_INDENT = re.compile(r"[ \t]*(?:-[ \t]+)?")
# Where a secret key or header may be: searched in the lower-cased text (IGNORECASE made the
# whole redaction five times slower), each one found then read as a whole key.
_WORDS = r"pass(?:wo?r?d|phrase)|secret|credential|api_?key|access_?key|private_?key|token|authorization"
_CANDIDATE = re.compile(_WORDS)
_LONGEST_KEY = 1024  # a key is read back at most this far (a longer run is judged by its tail)


def secret_spans(text: str, literals: Iterable[str | None] = ()) -> list[tuple[int, int]]:
    """Where `text` holds a secret: sorted, disjoint (start, end) spans; `literals` are secrets
    known by value (the API token)."""
    spans = _url_password_spans(text) + _keyed_spans(text)
    for literal in literals:
        if literal:
            spans += [(m.start(), m.end()) for m in re.finditer(re.escape(literal), text)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _url_password_spans(text: str) -> list[tuple[int, int]]:
    """`scheme://user:password@host`: the password runs to the last `@` of its word (an unencoded
    `@` in it, a `/`). Linear: a word's last `@` is found once, however many `://` it holds."""
    spans: list[tuple[int, int]] = []
    word_end = last_at = -1
    separator = text.find("://")
    while separator >= 0:
        scheme = separator
        while scheme > 0 and separator - scheme <= 30 and text[scheme - 1] in _SCHEME_CHARS:
            scheme -= 1
        user = (
            _URL_USER.match(text, separator + 3)
            if any(c.isascii() and c.isalpha() for c in text[scheme:separator])
            else None
        )
        if user:
            password = user.end()
            if password >= word_end:
                word_end = _WORD.match(text, password).end()
                last_at = text.rfind("@", password, word_end)
            if last_at > password:
                spans.append((password, last_at))
        separator = text.find("://", separator + 3)
    return spans


def _keyed_spans(text: str) -> list[tuple[int, int]]:
    """The values of secret keys, `Authorization:` headers and bearer tokens."""
    lowered = text.lower()
    if len(lowered) != len(text):  # lower() lengthens a few letters: positions would not agree
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    spans = [m.span("secret") for m in _BEARER.finditer(lowered)]
    done = 0
    for candidate in _CANDIDATE.finditer(lowered):
        if candidate.start() < done:
            continue  # inside a key or value already read
        start, end = _key_run(text, candidate.start(), candidate.end())
        done = end
        key = lowered[start:end]
        if key.endswith("authorization"):
            value = _AUTHORIZATION_VALUE.match(text, end)
        elif _SECRET_KEY.fullmatch(key):
            value = (_starts_a_line(text, start) and _YAML_VALUE.match(text, end)) or _INLINE_VALUE.match(text, end)
        else:
            continue
        if value:
            group = "quoted" if value.groupdict().get("quoted") is not None else "secret"
            if value.start(group) < value.end(group):
                spans.append(value.span(group))
            done = value.end()  # a masked value is not searched again: linear time
    return spans


def _key_run(text: str, start: int, end: int) -> tuple[int, int]:
    """The run of key characters (word characters, `.`, `-`) around text[start:end]."""
    floor = max(0, start - _LONGEST_KEY)
    while start > floor and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
        start -= 1
    return start, _KEY_CHARS.match(text, end).end()


def _starts_a_line(text: str, position: int) -> bool:
    """Whether only indentation (and a YAML list's `- `) stands before `position` on its line."""
    start = position
    while start > 0 and text[start - 1] in " \t-":
        start -= 1
    return (start == 0 or text[start - 1] in "\r\n") and _YAML_INDENT.fullmatch(text, start, position) is not None


def redact_from(text: str, start: int = 0, literals: Iterable[str | None] = ()) -> str:
    """`text[start:]` with its secrets masked, the secrets found in the whole of `text`: a slice
    that begins inside a secret shows `***`, never the secret's tail."""
    out, position = [], start
    for s, e in secret_spans(text, literals):
        if e <= position:
            continue
        out += [text[position : max(s, position)], MASK]
        position = e
    out.append(text[position:])
    return "".join(out)


def redact_secrets(text: str, literals: Iterable[str | None] = ()) -> str:
    return redact_from(text, 0, literals) if text else text


# The name the stages import (config.yaml and MLflow params): the same redaction.
redact_url_passwords = redact_secrets


def is_secret_key(key: object) -> bool:
    return isinstance(key, str) and _SECRET_KEY.fullmatch(key.lstrip("+~")) is not None


def redact_tree(value: Any, literals: Iterable[str | None] = (), *, _secret: bool = False) -> Any:
    """A config (dicts, lists, scalars) with the values of secret keys masked and every string redacted."""
    literals = tuple(literals)
    if isinstance(value, dict):
        # a mapping under a secret-looking key (the probe stage's `token:` settings) is judged key by key
        return {
            k: redact_tree(v, literals, _secret=is_secret_key(k) and not isinstance(v, dict)) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_tree(v, literals, _secret=_secret) for v in value]
    if _secret and value not in (None, "") and not isinstance(value, bool):
        return MASK
    return redact_secrets(value, literals) if isinstance(value, str) else value

"""Passwords out of anything shown or stored: `scheme://user:password@host` -> `user:***@host`.
Shared by the platform's logs and views (ptmlab.settings.redact) and the config a stage logs to
MLflow (a tracking or database URL may carry credentials)."""

from __future__ import annotations

import re

_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][\w+.-]*://[^/\s:@]+:)[^@\s/]+(?=@)")


def redact_url_passwords(text: str) -> str:
    return _URL_PASSWORD.sub(r"\g<head>***", text)

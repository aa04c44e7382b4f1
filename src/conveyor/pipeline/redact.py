"""Keep secrets out of outcome texts, events and logs (D16).

Error texts come from providers, HTTP clients and drivers, and such texts sometimes quote a URL
with its password, a bearer token or an ``api_key=`` parameter. Every text the engine stores or
logs passes through :func:`redact` first.
"""

from __future__ import annotations

import re

__all__ = ["redact"]

_PATTERNS = [
    # scheme://user:password@host → scheme://user:***@host
    (re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(?=@)"), r"\g<head>***"),
    # Authorization: Bearer xxx / Basic xxx
    (re.compile(r"(?i)\b(?P<head>(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\g<head>***"),
    # api_key=..., token: ..., password=..., secret=...
    (
        re.compile(
            r"(?i)\b(?P<head>(?:api[_-]?key|access[_-]?token|token|password|passwd|secret)"
            r"\s*[=:]\s*[\"']?)[^\s\"'&,;]+"
        ),
        r"\g<head>***",
    ),
]


def redact(text: str | None) -> str | None:
    """``text`` with credentials replaced by ``***`` (None stays None).

    Covers passwords in URLs, bearer/basic credentials, and ``key=value`` pairs whose key names
    a secret (api_key, access_token, token, password, secret).
    """
    if text is None:
        return None
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text

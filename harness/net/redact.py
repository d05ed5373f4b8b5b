"""Credentials masked in every message and log line a client writes.

A request carries its key in a header (``Authorization: Bearer``, Basic's user and password,
``x-api-key``, ``api-key``) or a query parameter (``?api-key=``, ``?key=``); a hostile server may
quote any of them back, in a body, a reason phrase or a ``Location``. :class:`Redactor` knows the
request's secrets and masks each where it stands as a whole token, and masks the value of every
credential-named query parameter and header quoted in the text, whatever it is.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping

#: What a credential is replaced with, in replies and in error messages.
REDACTED = "[REDACTED]"

#: Characters that continue a key-like token: a key is masked only where none touches it (nor a
#: decimal point: a digit key must not be masked inside "0.12345678").
_TOKEN_CHAR = r"[A-Za-z0-9_\-]"

#: Header names whose values are credentials.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie"})

#: ``?api-key=...``, ``&key=...``, ``access_token=...`` in a URL quoted in a message.
_QUERY = re.compile(r"(?i)([?&;](?:api[-_]?key|key|access[-_]?token|token|secret|password)=)[^&#;,\s\"']+")
#: ``Authorization: Bearer ...``, ``x-api-key: ...`` quoted in a message (a header echoed back).
_HEADER = re.compile(
    r"(?i)(?<![\w?&;=-])((?:proxy-)?authorization|x-api-key|api-key|x-goog-api-key)(\"?\s*:\s*\"?)(?:(bearer|basic)\s+)?[^\s\"',;}]+"
)


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` (the API key) masked where it stands as a whole
    token (not inside a longer word or number)."""
    if not secret or secret not in text:
        return text
    return re.sub(rf"(?<![A-Za-z0-9_\-.]){re.escape(secret)}(?!{_TOKEN_CHAR}|\.[0-9])", REDACTED, text)


def secrets_of(headers: Mapping[str, str], *, every: bool = False) -> list[str]:
    """Every credential the request's headers carry (whole values, tokens, Basic's user and
    password), longest first; ``every``: each header is a credential (a trace server's own headers)."""
    found: set[str] = set()
    for name, value in headers.items():
        if not every and name.lower() not in CREDENTIAL_HEADERS:
            continue
        scheme, _, token = value.partition(" ")
        found |= {value, token} if token else {value}
        if scheme.lower() == "basic":
            try:
                found |= set(base64.b64decode(token).decode("utf-8", "replace").split(":", 1))
            except (binascii.Error, ValueError):
                pass
    return sorted((s for s in found if len(s) >= 4), key=lambda s: (-len(s), s))


class Redactor:
    """Masks the given secrets and any quoted credential header or query parameter with ``mask``
    (the trace servers' messages have always said ``***``)."""

    __slots__ = ("mask", "secrets")

    def __init__(self, secrets: Iterable[str | None] = (), mask: str = REDACTED) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=lambda s: (-len(s), s))
        self.mask = mask

    def __call__(self, text: str) -> str:
        mask = self.mask
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, mask)
        text = _QUERY.sub(lambda m: m[1] + mask, text)
        return _HEADER.sub(lambda m: f"{m[1]}{m[2]}{m[3] + ' ' if m[3] else ''}{mask}", text)

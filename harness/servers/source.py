"""Where traces live: a trace server's URL, parsed once, with the credentials read from the environment.

A source is written ``KIND://HOST[:PORT][/PATH]/PROJECT``:

- ``phoenix://127.0.0.1:6006/my-app``: a Phoenix project (name or id); key in ``PHOENIX_API_KEY``;
- ``mlflow://127.0.0.1:5000/my-experiment``: an MLflow experiment (name); ``MLFLOW_TRACKING_TOKEN``,
  or ``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD``;
- ``langfuse://cloud.langfuse.com/my-project``: a Langfuse project (its keys name it; the name, when
  given, is checked against them); ``LANGFUSE_PUBLIC_KEY``/``LANGFUSE_SECRET_KEY``;
- ``langsmith://api.smith.langchain.com/my-project``: a LangSmith project (name); ``LANGSMITH_API_KEY``
  (or ``LANGCHAIN_API_KEY``).

The scheme may say the transport (``phoenix+https://``, ``mlflow+http://``); without it, a loopback
host is spoken to over http and any other over https. Path segments before the project are the
server's base path (``langfuse+https://example.com/langfuse/my-project``). Keys are never shown.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote, unquote, urlsplit

from ..errors import UserInputError

Kind = Literal["phoenix", "mlflow", "langfuse", "langsmith"]
KINDS: tuple[Kind, ...] = ("phoenix", "mlflow", "langfuse", "langsmith")
#: the environment variables each server's credentials are read from, in the order tried
CREDENTIALS: dict[Kind, tuple[str, ...]] = {
    "phoenix": ("PHOENIX_API_KEY",),
    "mlflow": ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"),
    "langfuse": ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"),
    "langsmith": ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"),
}


@dataclass(frozen=True, slots=True)
class Source:
    """A trace server and a project on it."""

    kind: Kind
    #: http(s)://host:port/base-path, without a trailing slash
    base_url: str
    #: the project (Phoenix project, MLflow experiment, Langfuse or LangSmith project); "" for a
    #: Langfuse source whose keys name the project
    project: str
    headers: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def url(self) -> str:
        """The source as the user writes it (no credentials), for messages and the sync cursor."""
        scheme, rest = self.base_url.split("://", 1)
        path = f"/{quote(self.project, safe='')}" if self.project else ""
        return f"{self.kind}+{scheme}://{rest}{path}"

    def __str__(self) -> str:
        return self.url


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_source(text: str, environ: dict[str, str] | None = None) -> Source:
    """The :class:`Source` of ``text``, its credentials from ``environ`` (default ``os.environ``)."""
    env = os.environ if environ is None else environ
    scheme, sep, _ = text.partition("://")
    name, _, transport = scheme.lower().partition("+")
    kind = next((k for k in KINDS if k == name), None)
    if not sep or kind is None:
        raise UserInputError(f"trace source {text!r}: expected KIND://HOST[:PORT]/PROJECT with KIND one of {', '.join(KINDS)}")
    if transport not in ("", "http", "https"):
        raise UserInputError(f"trace source {text!r}: the transport is http or https ({name}+https://...), not {transport!r}")
    parts = urlsplit("http://" + text.split("://", 1)[1])
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise UserInputError(f"trace source {text!r}: {exc}") from None
    if not host:
        raise UserInputError(f"trace source {text!r}: no host")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise UserInputError(f"trace source {text!r}: give the key in the environment ({', '.join(CREDENTIALS[kind])}), not in the URL")
    segments = [unquote(s) for s in parts.path.split("/") if s]
    project = segments.pop() if segments else ""
    if not project and kind != "langfuse":
        raise UserInputError(f"trace source {text!r}: name the project: {kind}://{parts.netloc}/PROJECT")
    transport = transport or ("http" if _loopback(host) else "https")
    netloc = f"[{host}]" if ":" in host else host
    base = f"{transport}://{netloc}{f':{port}' if port else ''}{''.join('/' + quote(s) for s in segments)}"
    return Source(kind=kind, base_url=base, project=project, headers=_headers(kind, env))


def _headers(kind: Kind, env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    import base64

    if kind == "phoenix":
        key = env.get("PHOENIX_API_KEY")
        return {"Authorization": f"Bearer {key}"} if key else {}
    if kind == "mlflow":
        if token := env.get("MLFLOW_TRACKING_TOKEN"):
            return {"Authorization": f"Bearer {token}"}
        user, password = env.get("MLFLOW_TRACKING_USERNAME"), env.get("MLFLOW_TRACKING_PASSWORD")
        if user and password:
            return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
        return {}
    if kind == "langfuse":
        public, secret = env.get("LANGFUSE_PUBLIC_KEY"), env.get("LANGFUSE_SECRET_KEY")
        if not public or not secret:
            raise UserInputError("a langfuse source needs LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY in the environment")
        return {"Authorization": "Basic " + base64.b64encode(f"{public}:{secret}".encode()).decode()}
    key = env.get("LANGSMITH_API_KEY") or env.get("LANGCHAIN_API_KEY")
    if not key:
        raise UserInputError("a langsmith source needs LANGSMITH_API_KEY in the environment")
    return {"x-api-key": key}

"""The one registry of trace servers: a source's kind to the client that speaks its API."""

from __future__ import annotations

from .base import TraceServer
from .http import ServerClient
from .langfuse import Langfuse
from .langsmith import LangSmith
from .mlflow import MLflow
from .phoenix import Phoenix

SERVERS: dict[str, type[TraceServer]] = {server.kind: server for server in (Phoenix, MLflow, Langfuse, LangSmith)}


def server_for(http: ServerClient) -> TraceServer:
    """The client of ``http``'s server kind."""
    return SERVERS[http.source.kind](http)

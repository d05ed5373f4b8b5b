"""A small tool-using agent that writes its traces into a trace server with the server's own SDK.

Run as a separate process by the trace-server tests (``python -m tests.servers.agent_app``), as a
team's application would run: the SDKs' global instrumentation never touches the test process.
The agent asks the scripted model of ``tests/fixtures/traces/agent_server.py`` (over 127.0.0.1),
which calls the ``get_weather`` tool once, then answers with the tool's result.

- ``phoenix``: OpenInference's OpenAI instrumentation and its tracer's ``agent``/``tool`` spans,
  exported over OTLP/HTTP to Phoenix (project from the ``openinference.project.name`` resource
  attribute, as ``phoenix.otel.register`` sets it) and, the same spans, to an OTLP JSON file.
- ``mlflow``: ``mlflow.start_span`` (AGENT), a CHAT_MODEL span per model call with its messages,
  tools and reply, and ``@mlflow.trace`` (TOOL) for the tool, logged to an MLflow tracking server;
  each trace is also written as ``Trace.to_json()``, one a line.

It prints one JSON line: the trace ids it wrote, in order.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import sys
from pathlib import Path

from tests.fixtures.traces.agent_server import AgentServer
from tests.fixtures.traces.generate import agent_loop, weather


def phoenix(endpoint: str, project: str, questions: list[str], out: Path) -> list[str]:
    import openai
    from openinference.instrumentation import OITracer, TraceConfig
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent", "openinference.project.name": project}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(out))))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = OITracer(provider.get_tracer("weather-agent"), config=TraceConfig())
    trace_ids: list[str] = []

    @tracer.tool(name="get_weather")
    def get_weather(city: str) -> str:
        return weather(city)

    @tracer.agent(name="weather_agent")
    def run_agent(question: str) -> str:
        from opentelemetry import trace

        trace_ids.append(format(trace.get_current_span().get_span_context().trace_id, "032x"))
        return agent_loop(client, question, lambda name, args, call_id: get_weather(**args))

    with AgentServer() as base_url:
        client = openai.OpenAI(base_url=base_url, api_key="test")
        for question in questions:
            run_agent(question)
    provider.shutdown()
    return trace_ids


def mlflow_app(tracking_uri: str, experiment: str, questions: list[str], out: Path) -> list[str]:
    import mlflow
    import openai
    from mlflow.entities import SpanType

    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment(experiment)
    _server_version()

    @mlflow.trace(span_type=SpanType.TOOL, name="get_weather")
    def get_weather(city: str) -> str:
        return weather(city)

    class TracedChat:
        """The OpenAI client's chat calls, each a CHAT_MODEL span with its request and reply."""

        def __init__(self, client: openai.OpenAI) -> None:
            self.client = client
            self.chat = self
            self.completions = self

        def create(self, **request):
            with mlflow.start_span("chat.completions", span_type=SpanType.CHAT_MODEL) as span:
                span.set_inputs(request)
                reply = self.client.chat.completions.create(**request)
                span.set_outputs(reply.model_dump(exclude_none=True))
                return reply

    trace_ids = []
    with AgentServer() as base_url:
        client = TracedChat(openai.OpenAI(base_url=base_url, api_key="test"))
        for question in questions:
            with mlflow.start_span("weather_agent", span_type=SpanType.AGENT) as root:
                root.set_inputs({"question": question})
                answer = agent_loop(client, question, lambda name, args, call_id: get_weather(**args))
                root.set_outputs({"answer": answer})
            trace_ids.append(root.trace_id)
    mlflow.flush_trace_async_logging()
    with out.open("w", encoding="utf-8") as fh:
        for trace_id in trace_ids:
            fh.write(_exported(mlflow, trace_id).to_json() + "\n")
    return trace_ids


def _server_version(timeout_s: float = 120.0) -> None:
    """Ask the server its version, as the SDK does before it logs spans to the tracking store, until
    it answers. The SDK asks once per process (``RestStore._get_server_version``: 3 s timeout, no
    retry, ``functools.lru_cache``, a failure cached as ``None``); on the loaded machine that one
    request timed out, ``log_spans`` raised ``NotImplementedError``, the exporter turned span logging
    off for the process (``_store_supports_log_spans = False``) and every trace went to the
    ``traces.json`` artifact only, without the ``mlflow.trace.spansLocation`` tag. Asked here first,
    the SDK's cache holds the answer, so its spans go to the store."""
    import time

    from mlflow.store.tracking.rest_store import RestStore
    from mlflow.tracking._tracking_service.utils import _get_store
    from packaging.version import Version

    creds = _get_store().get_host_creds()
    deadline = time.monotonic() + timeout_s
    while (version := RestStore._get_server_version(creds)) is None:
        RestStore._get_server_version.cache_clear()  # the failure is not kept: asked again
        if time.monotonic() > deadline:
            raise TimeoutError(f"the MLflow server did not answer GET /version within {timeout_s:.0f} s")
        time.sleep(0.5)
    if version < Version("3.4"):  # the SDK's own bound for span logging
        raise RuntimeError(f"the MLflow server is {version}: the SDK logs spans to the tracking store from 3.4 on")


def _exported(mlflow, trace_id: str, timeout_s: float = 120.0):  # type: ignore[no-untyped-def]
    """The trace as the server holds it, once it has every span (the SDK exports asynchronously:
    until then the server answers that the trace is not fully exported, or has fewer spans)."""
    import time

    deadline = time.monotonic() + timeout_s
    problem: object = "no trace"
    while True:
        try:
            trace = mlflow.get_trace(trace_id, silent=True, flush=True)
        except Exception as exc:  # noqa: BLE001 - the SDK's "not fully exported yet" and the like: asked again
            trace, problem = None, exc
        if (
            trace is not None and len(trace.data.spans) >= 4 and _in_store(trace) and _artifact_uploaded(mlflow, trace)
        ):  # the agent, two model calls, the tool
            return trace
        if time.monotonic() > deadline:
            raise TimeoutError(f"trace {trace_id} was not complete on the server within {timeout_s:.0f} s: {problem}")
        time.sleep(0.2)


def _in_store(trace) -> bool:  # type: ignore[no-untyped-def]
    """Whether the trace's spans are in the tracking store (``mlflow.trace.spansLocation``), so that
    the store test has both forms of every trace. The SDK's exporter logs each span as it ends and
    drops one whose request failed with a debug message only (``MlflowV3SpanExporter._log_spans``);
    such a trace is whole in its artifact alone, and its spans are logged here with the SDK's call
    (``TracingClient.log_spans``), from the trace the server holds, and the fact told on stderr."""
    if trace.info.tags.get("mlflow.trace.spansLocation") == "TRACKING_STORE":
        return True
    from mlflow.tracing.client import TracingClient

    sys.stderr.write(f"trace {trace.info.trace_id}: spans not in the tracking store, logged again\n")
    try:
        TracingClient().log_spans(trace.info.experiment_id, trace.data.spans)
    except Exception as exc:  # noqa: BLE001 - a failed request under load: asked again on the next look
        sys.stderr.write(f"trace {trace.info.trace_id}: logging its spans failed: {exc}\n")
    return False  # asked again: the next look finds the tag


def _artifact_uploaded(mlflow, trace) -> bool:  # type: ignore[no-untyped-def]
    """Whether the trace's ``traces.json`` artifact is on the server, so that the artifact test
    has both forms of every trace. The SDK uploads it only when the tracking store had not yet
    taken the spans when the trace was logged (``_should_log_spans_to_artifacts``, a race decided
    per trace); when the store took them first, the artifact is uploaded here by the SDK's own
    uploader (``TracingClient._upload_trace_data``, the call the SDK makes), from the trace the server holds."""
    import tempfile

    location = trace.info.tags.get("mlflow.artifactLocation")
    if not location:
        return True
    with tempfile.TemporaryDirectory() as tmp:
        try:
            mlflow.artifacts.download_artifacts(artifact_uri=f"{location.rstrip('/')}/traces.json", dst_path=tmp)
            return True
        except Exception:  # noqa: BLE001 - not there (yet)
            pass
    if trace.info.tags.get("mlflow.trace.spansLocation") == "TRACKING_STORE":
        from mlflow.tracing.client import TracingClient

        TracingClient()._upload_trace_data(trace.info, trace.data)
    return False  # asked again: the next look finds it


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("server", choices=("phoenix", "mlflow"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--question", action="append", required=True)
    parser.add_argument("--dump-after", type=float, default=None, help="print every thread's stack after this many seconds")
    args = parser.parse_args(argv)
    if args.dump_after:
        faulthandler.dump_traceback_later(args.dump_after, exit=False)
    write = phoenix if args.server == "phoenix" else mlflow_app
    ids = write(args.url, args.project, args.question, args.out)
    sys.stdout.write(json.dumps(ids) + "\n")
    if args.server == "mlflow":
        # Every trace is on the server whole by now (_exported waited for its spans and its artifact),
        # so the SDK's exit handler, which flushes its async export queue once more, has nothing left
        # to send; on a loaded machine it hung in interpreter shutdown past the app's budget (the app
        # had finished in 110 s of its 240; the stack dump showed only a main thread with no Python
        # frame). The app ends here instead, its output flushed.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()

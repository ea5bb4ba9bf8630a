"""Opt-in request spans (the `otel` extra): one span per request, a child of the
W3C `traceparent` in the request's `_meta` when it has one.

On only where OpenTelemetry's SDK is installed and an `OTEL_*` variable is
set (and `OTEL_SDK_DISABLED` is not true). Off, nothing is wrapped: the
handlers run as they would without this module. The exporter follows
`OTEL_TRACES_EXPORTER`: `otlp` (the default; needs the OTLP/HTTP exporter),
`console` (to stderr: stdout is the protocol's) or `none`.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any

from bashrpc.server import log

SERVICE_NAME = "bashrpc"
_log = log.get("traces")

Wrap = Callable[[str, Callable[..., Any]], Callable[..., Any]]


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for tracing (pure)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(name.startswith("OTEL_") for name in environ)


@functools.cache
def spans() -> Wrap | None:
    """The process's wrapper, made once (one tracer provider however many
    connections a daemon serves)."""
    return wrapper(os.environ)


def wrapper(environ: Mapping[str, str]) -> Wrap | None:
    """What wraps each handler in a span; None when tracing is off."""
    if not wanted(environ) or importlib.util.find_spec("opentelemetry.sdk") is None:
        return None
    tracer = _tracer(environ)
    return None if tracer is None else functools.partial(_traced, tracer)


def _tracer(environ: Mapping[str, str]) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    kind = environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")[0].strip().lower()
    name = environ.get("OTEL_SERVICE_NAME", SERVICE_NAME)
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    if kind == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=log.stderr())))
    elif kind == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            _log.warning("OTEL_TRACES_EXPORTER=otlp needs pip install 'bashrpc[otel]'; no spans")
            return None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        _log.warning("OTEL_TRACES_EXPORTER=%s is not one bashrpc knows; no spans", kind)
        return None
    atexit.register(provider.shutdown)
    return provider.get_tracer("bashrpc")


def _traced(tracer: Any, method: str, handler: Callable[..., Any]) -> Callable[..., Any]:
    from opentelemetry.trace import SpanKind

    def span(params: Any) -> Any:
        return tracer.start_as_current_span(
            method,
            context=_parent(params),
            kind=SpanKind.SERVER,
            attributes={"rpc.system": "jsonrpc", "rpc.method": method},
        )

    if inspect.iscoroutinefunction(handler):

        async def traced_async(ctx: Any, params: Any) -> Any:
            with span(params):
                return await handler(ctx, params)

        return traced_async

    def traced(ctx: Any, params: Any) -> Any:
        with span(params):
            return handler(ctx, params)

    return traced


def _parent(params: Any) -> Any:
    """The context `_meta.traceparent` names, or None (a new trace)."""
    meta = getattr(params, "meta", None)
    traceparent = getattr(meta, "trace_parent", None)
    if not traceparent:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {"traceparent": traceparent}
    tracestate = getattr(meta, "trace_state", None)
    if tracestate:
        carrier["tracestate"] = tracestate
    return TraceContextTextMapPropagator().extract(carrier)

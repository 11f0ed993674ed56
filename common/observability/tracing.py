"""OpenTelemetry traces: one trace per submitted session, from the API's request span through
the task headers (the official Celery instrumentation) and across the fair lanes (a W3C
`traceparent` carried with each parked step) to a span per stage of the job.

Spans carry ids (tenant, space, session, job), never the text of a turn or a fact.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from opentelemetry import context, propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from common.models import ids
from common.observability import logs, metrics
from common.settings import TracingSettings

API = "atommem-api"
WORKER = "atommem-worker"
TRACER = "atommem"

P = ParamSpec("P")
R = TypeVar("R")

# Which lane task ran a resumed step: its span is linked from the step's stage span.
_VIA = context.create_key("atommem.lane_task")
_installed: TracerProvider | None = None
_lock = threading.Lock()


class JsonLinesExporter(SpanExporter):
    """Appends each finished span as one JSON object a line (the SDK's own span JSON): for
    tests and local runs. Every line goes out in one `write` on an O_APPEND descriptor, so
    processes sharing the file never interleave within a line."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            for span in spans:
                os.write(self._fd, (span.to_json(indent=None) + "\n").encode())
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def setup(settings: TracingSettings, service: str) -> TracerProvider | None:
    """Install this process's tracer provider with the configured exporters, once; None when
    tracing is off, and the OpenTelemetry API then stays a no-op. Set up where the spans are
    made: a process that forks after this would leave its children a provider whose exporter
    threads did not survive (a prefork pool's children each set up their own)."""
    global _installed
    if not settings.enabled:
        return None
    with _lock:
        if _installed is not None:
            return _installed
        provider = TracerProvider(
            resource=Resource.create({SERVICE_NAME: service}),
            sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
        )
        if settings.otlp_endpoint:
            provider.add_span_processor(
                BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.otlp_endpoint))
            )
        if settings.file is not None:
            path = Path(str(settings.file).replace("{service}", service))
            # Short batches: a test reads the file soon after a job ends.
            provider.add_span_processor(
                BatchSpanProcessor(JsonLinesExporter(path), schedule_delay_millis=200)
            )
        trace.set_tracer_provider(provider)
        _installed = provider
        return provider


def shutdown() -> None:
    """Flush and close the exporters (a worker process stopping)."""
    if _installed is not None:
        _installed.shutdown()


def instrument_celery(settings: TracingSettings, service: str) -> None:
    """Trace task publishing and running: the producer puts the trace context into each
    task's headers, the worker runs the task in a span continuing it."""
    if setup(settings, service) is None:
        return
    instrumentor = CeleryInstrumentor()  # type: ignore[no-untyped-call]
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()


def instrument_app(app: Any, settings: TracingSettings) -> None:
    """A span per HTTP request (the FastAPI instrumentation, without its per-message
    receive/send spans), and the tasks it sends continue it."""
    if not settings.enabled:
        return
    instrument_celery(settings, API)
    # imported here: the package is the API's (the `api` extra), not the workers'
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(app, exclude_spans=["receive", "send"])


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers (`traceparent`, `tracestate`), to travel with
    a step parked in a lane; empty when no span is current (tracing off)."""
    headers: dict[str, str] = {}
    if trace.get_current_span().get_span_context().is_valid:
        propagate.inject(headers)
    return headers


@contextmanager
def resumed(headers: Mapping[str, str] | None) -> Iterator[None]:
    """Run a step taken from a lane in the trace it was parked from: its stage span becomes
    a child of the span that offered it, and links to the lane task running it now (which
    belongs to whichever trace sent that task)."""
    if not headers:
        yield
        return
    via = trace.get_current_span().get_span_context()
    ctx = context.set_value(_VIA, via, propagate.extract(dict(headers)))
    token = context.attach(ctx)
    try:
        yield
    finally:
        context.detach(token)


def attributes(payload: object) -> dict[str, str | int]:
    """A payload's ids as span attributes (and the log context): never its text."""
    session = getattr(payload, "session", None)
    tenant, space = getattr(payload, "tenant", None), getattr(payload, "space", None)
    session_id = getattr(session, "session_id", None) or getattr(payload, "session_id", None)
    job_id = getattr(payload, "job_id", None)
    if job_id is None and isinstance(tenant, str) and isinstance(space, str) and session_id:
        job_id = ids.job_id(tenant, space, session_id)  # a profile names its session only
    found: dict[str, Any] = {
        "atommem.tenant": tenant,
        "atommem.space": space,
        "atommem.session_id": session_id,
        "atommem.job_id": job_id,
        "atommem.chunk": getattr(payload, "chunk", None),
        "atommem.chunks": getattr(payload, "chunks", None),
    }
    return {k: v for k, v in found.items() if isinstance(v, str | int)}


@contextmanager
def stage_span(name: str, payload: object) -> Iterator[trace.Span]:
    """A span `atommem.<name>` around one stage of a job (its time also goes to
    `atommem_stage_duration_seconds`), with the payload's ids, which also go into the log
    context (logs.within) with the stage's trace id."""
    attrs = attributes(payload)
    via = context.get_value(_VIA)
    links = [trace.Link(via)] if isinstance(via, trace.SpanContext) and via.is_valid else []
    tracer = trace.get_tracer(TRACER)
    with (
        tracer.start_as_current_span(f"atommem.{name}", attributes=attrs, links=links) as span,
        metrics.STAGE_DURATION.labels(name).time(),
    ):
        ids: dict[str, str | int] = {k.removeprefix("atommem."): v for k, v in attrs.items()}
        if span.get_span_context().is_valid:
            ids["trace_id"] = trace.format_trace_id(span.get_span_context().trace_id)
        with logs.within(**ids):
            yield span


def stage(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a stage function whose first argument is its payload (see `stage_span`)."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            with stage_span(name, args[0] if args else None):
                return fn(*args, **kwargs)

        return run

    return wrap


def identify(**ids: str | None) -> None:
    """Name what the current work belongs to (a request once its tenant is known): on its
    span and its log lines."""
    known = {k: v for k, v in ids.items() if v is not None}
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({f"atommem.{k}": v for k, v in known.items()})
    logs.bind(**known)

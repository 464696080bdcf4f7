"""What every streamctl process serves for Prometheus, and how: one endpoint, the SDK's series
beside ours, activity outcomes counted by an interceptor.

One endpoint per process (``--metrics-port`` or ``STREAMCTL_METRICS_PORT``; none by default,
see :mod:`streamctl.config`): ``GET /metrics`` answers the text exposition format with our
``streamctl_*`` series followed by the Temporal SDK's own (``temporal_*``: polls, task slots,
schedule-to-start and execution latencies, request failures). The SDK's exporter lives in
Rust core and serves its own socket; we bind it to a private loopback port
(:class:`SdkMetrics`) and append its text to ours on every scrape, so a user scrapes one port
per process. The two never share a metric name (ours are all ``streamctl_``-prefixed), so the
concatenation is a valid exposition.

What each process counts is its own module's: the coordinator worker's in
:mod:`streamctl.worker.coordinator_metrics`, an agent's in :mod:`streamctl.agent.agent_metrics`.

A metric can never fail what it measures: every observation swallows and logs its own errors.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    generate_latest,
)
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

log = logging.getLogger(__name__)

PASS_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (0, 1, 5, 10, 50, 100, 500, 1000, 2000, 5000, 10000, 20000)
ACTION_SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
SCRAPE_QUERY_TIMEOUT_S = 5.0
"""How long a scrape waits for the workflow's ``status`` query or the SDK's exporter."""


class MetricsPortInUse(OSError):
    """The metrics endpoint's address cannot be bound."""


# --- the Temporal SDK's exporter -----------------------------------------------------------------


class SdkMetrics:
    """A Temporal runtime whose metrics go to a Prometheus exporter on a private loopback
    port; pass :attr:`runtime` to :func:`streamctl.workflows.wire.connect`."""

    def __init__(self) -> None:
        from streamctl.local_ports import free_port

        self.port = free_port()
        self.runtime = Runtime(
            telemetry=TelemetryConfig(
                metrics=PrometheusConfig(bind_address=f"127.0.0.1:{self.port}")
            )
        )

    def text(self) -> bytes:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.port}/metrics", timeout=SCRAPE_QUERY_TIMEOUT_S
            ) as answer:
                body: bytes = answer.read()
        except OSError as error:
            return f"# Temporal SDK metrics unavailable: {error}\n".encode()
        return body if body.endswith(b"\n") or not body else body + b"\n"


# --- the endpoint ------------------------------------------------------------------------


class MetricsEndpoint:
    """``GET /metrics`` on ``host:port``: ``registry``'s series, then the SDK's."""

    def __init__(
        self, registry: CollectorRegistry, host: str, port: int, sdk: SdkMetrics | None
    ) -> None:
        self.registry = registry
        self.sdk = sdk
        try:
            self._server = ThreadingHTTPServer((host, port), self._handler())
        except OSError as error:
            raise MetricsPortInUse(
                error.errno, f"cannot serve metrics on {host}:{port}: {error.strerror}"
            ) from None
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-endpoint", daemon=True
        )
        self._thread.start()

    def body(self) -> bytes:
        ours = generate_latest(self.registry)
        return ours + self.sdk.text() if self.sdk is not None else ours

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                    self.send_error(404, "only /metrics is served here")
                    return
                try:
                    body = endpoint.body()
                except Exception as error:  # a scrape must never end the server thread
                    log.exception("metrics scrape failed")
                    self.send_error(500, f"metrics scrape failed: {error}")
                    return
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # one line per scrape would drown the worker's log

        return Handler


# --- activities: timing, outcomes, results ---------------------------------------------------

ActivityObserver = Callable[[str, float, Any, BaseException | None], None]
"""Called after each activity: its type, seconds, result (None on error), error (or None)."""


class ActivityMetrics(Interceptor):
    """Hands every activity this worker runs to ``observe``, in the worker process (also for
    activities the SDK runs in a process pool: the pool returns their result here)."""

    def __init__(self, observe: ActivityObserver) -> None:
        self._observe = observe

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ObservedActivity(next, self._observe)


class _ObservedActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, observe: ActivityObserver) -> None:
        super().__init__(next)
        self._observe = observe

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        name = activity.info().activity_type
        started = time.perf_counter()
        try:
            result = await super().execute_activity(input)
        except BaseException as error:
            self._safely(name, time.perf_counter() - started, None, error)
            raise
        self._safely(name, time.perf_counter() - started, result, None)
        return result

    def _safely(self, name: str, seconds: float, result: Any, error: BaseException | None) -> None:
        try:
            self._observe(name, seconds, result, error)
        except Exception:
            log.exception("could not record metrics of activity %s", name)


def outcome_of(error: BaseException | None) -> str:
    """``ok``, or the error's type: an ``ApplicationError``'s type, else the class name (a set
    bounded by the code, so a label's values stay few)."""
    if error is None:
        return "ok"
    if isinstance(error, ApplicationError) and error.type:
        return error.type
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    return type(error).__name__


@dataclass(frozen=True)
class MetricsAddress:
    """Where a process serves its metrics; ``port`` 0 means it serves none."""

    host: str = "127.0.0.1"
    port: int = 0

    @property
    def enabled(self) -> bool:
        return self.port > 0

"""Prometheus metrics of the coordinator worker and of each Spark agent.

One endpoint per process (``--metrics-port`` or ``STREAMCTL_METRICS_PORT``; none by default,
see :mod:`streamctl.config`): ``GET /metrics`` answers the text exposition format with our
``streamctl_*`` series followed by the Temporal SDK's own (``temporal_*``: polls, task slots,
schedule-to-start and execution latencies, request failures). The SDK's exporter lives in
Rust core and serves its own socket; we bind it to a private loopback port
(:class:`SdkMetrics`) and append its text to ours on every scrape, so a user scrapes one port
per process. The two never share a metric name (ours are all ``streamctl_``-prefixed), so the
concatenation is a valid exposition.

Where the coordinator's numbers come from, and why there:

* **Per pass** (duration, requests and events per pass, requests by kind and outcome). The
  pass activity runs in a spawned process pool, so a ``prometheus_client`` registry in the
  worker process never sees what the pass computes. The pass already returns a
  :class:`~streamctl.protocol.pass_io.PassResult` to the worker process (the pool hands the
  return value back before the SDK serializes it), so the pass counts its requests by kind and
  outcome once, in a :class:`~streamctl.protocol.pass_io.PassTally`, and an activity
  interceptor in the worker process (:class:`ActivityMetrics`) times the activity and adds the
  tally to the counters: one counter update per kind and outcome per pass, no per-request
  locks, no files. (``prometheus_client``'s multiprocess mode would need an environment
  variable set before the pool and every agent subprocess import it, and a directory of mmap
  files per pid to clean; this needs neither.) The tally also lands in the pass's history
  event, a few hundred bytes next to the answers it summarizes. A replayed pass (a retry
  after a commit) counts as ``replayed`` and adds no outcomes: the attempt that committed was
  the one that answered.
* **State** (queries by state, agents by state and each agent's reported load and capacity,
  pending messages, snapshot version) is read when scraped: one grouped ``SELECT`` on the
  catalog and one ``status`` query of the coordinator workflow, nothing on the hot path. Every
  replica reports the same state (aggregate with ``max``); ``streamctl_collector_up{source}``
  is 0 while the catalog or the workflow cannot be read, and that source's series are absent.

An agent counts its actions (activities) by kind and outcome with the same interceptor,
reports its load from the counter its heartbeats read, and takes per-query input and processed
rows/s from the ``Statistics`` events its ``StreamingQueryListener`` emits (a query's series
go away when the agent reports it ended).

A metric can never fail what it measures: every observation swallows and logs its own errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import select
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from streamctl.catalog.census import take_census
from streamctl.catalog.models import Worker
from streamctl.catalog.store import catalog_engine
from streamctl.lifecycle.query_states import QueryState
from streamctl.lifecycle.worker_states import AgentState
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import AgentStatus
from streamctl.protocol.coordinator_config import CoordinatorStatus
from streamctl.protocol.pass_io import PassResult
from streamctl.workflows.coordinator import CoordinatorWorkflow

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
        from streamctl.worker.temporal_server import free_port

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


# --- the coordinator worker --------------------------------------------------------------------


class CoordinatorMetrics:
    """The coordinator worker's series (a registry per worker, so several workers in one
    process, as in tests, never clash)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.pass_duration = Histogram(
            "streamctl_pass_duration_seconds",
            "Wall time of the pass activity (decode, apply, commit), seconds.",
            buckets=PASS_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.passes = Counter(
            "streamctl_passes",
            "Pass activities run by this worker, by result (applied, replayed, failed).",
            ["result"],
            registry=self.registry,
        )
        self.pass_requests = Histogram(
            "streamctl_pass_requests",
            "Requests per pass (batch size).",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.pass_events = Histogram(
            "streamctl_pass_events",
            "Events per pass, after compaction (batch size).",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.requests = Counter(
            "streamctl_requests",
            "Requests answered by passes of this worker, by kind and outcome (ok, an error code, "
            "or asked_again: its pass had no time or room for it, a later one answers it).",
            ["kind", "outcome"],
            registry=self.registry,
        )
        for result in ("applied", "replayed", "failed"):
            self.passes.labels(result)

    def interceptor(self) -> ActivityMetrics:
        return ActivityMetrics(self.observe)

    def observe(self, name: str, seconds: float, result: Any, error: BaseException | None) -> None:
        if name != "apply_pass":
            return
        self.pass_duration.observe(seconds)
        if error is not None or not isinstance(result, PassResult):
            self.passes.labels("failed").inc()
            return
        self.passes.labels("replayed" if result.replayed else "applied").inc()
        tally = result.tally
        if tally is None:
            return
        self.pass_requests.observe(tally.requests)
        self.pass_events.observe(tally.events)
        for kind, outcomes in tally.outcomes.items():
            for outcome, count in outcomes.items():
                self.requests.labels(kind, outcome).inc(count)

    def serve(
        self,
        host: str,
        port: int,
        sdk: SdkMetrics | None,
        catalog_url: str,
        status: Callable[[], CoordinatorStatus],
    ) -> MetricsEndpoint:
        self.registry.register(CoordinatorStateCollector(catalog_url, status))
        return MetricsEndpoint(self.registry, host, port, sdk)


def workflow_status(
    client: Client, workflow_id: str, loop: asyncio.AbstractEventLoop
) -> Callable[[], CoordinatorStatus]:
    """The coordinator workflow's ``status`` query, callable from the endpoint's thread."""
    # The untyped handle: mypy 2.4 cannot match ``run``'s signature to
    # ``get_workflow_handle_for``'s overloads; the query below is typed by its method anyway.
    handle = client.get_workflow_handle(workflow_id)

    def status() -> CoordinatorStatus:
        query = handle.query(CoordinatorWorkflow.status)
        return asyncio.run_coroutine_threadsafe(query, loop).result(SCRAPE_QUERY_TIMEOUT_S)

    return status


class CoordinatorStateCollector(Collector):
    """Gauges read when scraped: the catalog's queries and agents, the workflow's pending work."""

    def __init__(self, catalog_url: str, status: Callable[[], CoordinatorStatus]) -> None:
        self.catalog_url = catalog_url
        self.status = status

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            "streamctl_collector_up",
            "1 if the source of the scrape-time series could be read, else 0.",
            labels=["source"],
        )
        try:
            catalog = list(self._catalog())
        except Exception as error:
            log.warning("metrics: cannot read the catalog: %r", error)
            catalog = []
        up.add_metric(["catalog"], 1.0 if catalog else 0.0)
        try:
            workflow = list(self._workflow())
        except Exception as error:
            log.warning("metrics: cannot query the coordinator workflow: %r", error)
            workflow = []
        up.add_metric(["workflow"], 1.0 if workflow else 0.0)
        yield up
        yield from catalog
        yield from workflow

    def _catalog(self) -> Iterator[Metric]:
        with catalog_engine(self.catalog_url).connect() as connection:
            census = take_census(connection)
            agents = connection.execute(
                select(Worker.name, Worker.state, Worker.load, Worker.capacity).order_by(
                    Worker.name
                )
            ).all()
        queries = GaugeMetricFamily(
            "streamctl_queries", "Queries in the catalog by current state.", labels=["state"]
        )
        by_state = census.queries
        for state in (*QueryState, *(s for s in by_state if s not in set(QueryState))):
            queries.add_metric([str(state)], float(by_state.get(state, 0)))
        states = GaugeMetricFamily(
            "streamctl_coordinator_agents", "Registered agents by liveness state.", labels=["state"]
        )
        for state, count in {**{str(state): 0 for state in AgentState}, **census.agents}.items():
            states.add_metric([state], float(count))
        load = GaugeMetricFamily(
            "streamctl_coordinator_agent_load",
            "Queries each agent runs, as its last heartbeat reported.",
            labels=["agent"],
        )
        capacity = GaugeMetricFamily(
            "streamctl_coordinator_agent_capacity",
            "Queries each agent may run at most.",
            labels=["agent"],
        )
        for agent in agents:
            load.add_metric([agent.name], float(agent.load))
            capacity.add_metric([agent.name], float(agent.capacity))
        yield from (queries, states, load, capacity)

    def _workflow(self) -> Iterator[Metric]:
        status = self.status()
        pending = GaugeMetricFamily(
            "streamctl_pending_messages",
            "Messages the coordinator workflow holds for its next passes.",
            labels=["type"],
        )
        pending.add_metric(["requests"], float(status.pending_requests))
        pending.add_metric(["events"], float(status.pending - status.pending_requests))
        yield pending
        yield GaugeMetricFamily(
            "streamctl_snapshot_version", "The catalog's snapshot version.", value=status.version
        )
        yield GaugeMetricFamily(
            "streamctl_passes_run", "Passes the coordinator workflow has run.", status.passes_run
        )


# --- the agent ---------------------------------------------------------------------------------


class AgentMetrics:
    """A Spark agent's series."""

    def __init__(self, agent: str, capacity: int) -> None:
        self.agent = agent
        self.registry = CollectorRegistry()
        self.running = Gauge(
            "streamctl_agent_running_queries",
            "Streaming queries this agent runs now.",
            ["agent"],
            registry=self.registry,
        )
        self.capacity = Gauge(
            "streamctl_agent_capacity",
            "Queries this agent may run at most.",
            ["agent"],
            registry=self.registry,
        )
        self.capacity.labels(agent).set(capacity)
        self.actions = Counter(
            "streamctl_agent_actions",
            "Actions (activities) this agent ran, by kind and outcome (ok or error type).",
            ["agent", "action", "outcome"],
            registry=self.registry,
        )
        self.action_duration = Histogram(
            "streamctl_agent_action_duration_seconds",
            "Wall time of the agent's actions, seconds.",
            ["agent", "action"],
            buckets=ACTION_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.input_rate = Gauge(
            "streamctl_query_input_rows_per_second",
            "Input rows/s of a query's last micro-batch (Spark's StreamingQueryListener).",
            ["agent", "query"],
            registry=self.registry,
        )
        self.processed_rate = Gauge(
            "streamctl_query_processed_rows_per_second",
            "Processed rows/s of a query's last micro-batch (Spark's StreamingQueryListener).",
            ["agent", "query"],
            registry=self.registry,
        )
        self._queries: set[str] = set()
        self._lock = threading.Lock()

    def track_load(self, running: Callable[[], int]) -> None:
        """Read the running-query count at scrape time (the one the heartbeats send)."""
        self.running.labels(self.agent).set_function(lambda: float(running()))

    def interceptor(self) -> ActivityMetrics:
        return ActivityMetrics(self.observe)

    def observe(self, name: str, seconds: float, result: Any, error: BaseException | None) -> None:
        self.actions.labels(self.agent, name, outcome_of(error)).inc()
        self.action_duration.labels(self.agent, name).observe(seconds)

    def observing(self, emit: Callable[[m.Event], Any]) -> Callable[[m.Event], Any]:
        """``emit`` (where the agent's events go), recording the rates each ``Statistics``
        event carries and dropping a query's series once an event reports it ended."""

        def observed(event: m.Event) -> Any:
            with contextlib.suppress(Exception):  # never lose the event over a metric
                self.on_event(event)
            return emit(event)

        return observed

    def on_event(self, event: m.Event) -> None:
        if isinstance(event, m.Statistics):
            query = str(event.query_id)
            with self._lock:
                self._queries.add(query)
                self.input_rate.labels(self.agent, query).set(
                    event.values.get("input_rows_per_s", 0.0)
                )
                self.processed_rate.labels(self.agent, query).set(
                    event.values.get("processed_rows_per_s", 0.0)
                )
        elif isinstance(event, m.QueryStatusChanged) and event.status != AgentStatus.RUNNING:
            query = str(event.query_id)
            with self._lock:
                if query in self._queries:
                    self._queries.discard(query)
                    self.input_rate.remove(self.agent, query)
                    self.processed_rate.remove(self.agent, query)

    def serve(self, host: str, port: int, sdk: SdkMetrics | None) -> MetricsEndpoint:
        return MetricsEndpoint(self.registry, host, port, sdk)


@dataclass(frozen=True)
class MetricsAddress:
    """Where a process serves its metrics; ``port`` 0 means it serves none."""

    host: str = "127.0.0.1"
    port: int = 0

    @property
    def enabled(self) -> bool:
        return self.port > 0

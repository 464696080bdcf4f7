"""Prometheus metrics of a Spark agent (served by :mod:`streamctl.process_metrics`).

An agent counts its actions (activities) by kind and outcome with the process's activity
interceptor, reports its load from the counter its heartbeats read, and takes per-query input
and processed rows/s from the ``Statistics`` events its ``StreamingQueryListener`` emits (a
query's series go away when the agent reports it ended). A metric can never fail what it
measures: every observation swallows and logs its own errors.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)

from streamctl.process_metrics import (
    ACTION_SECONDS_BUCKETS,
    ActivityMetrics,
    MetricsEndpoint,
    SdkMetrics,
    outcome_of,
)
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import AgentStatus

log = logging.getLogger(__name__)

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

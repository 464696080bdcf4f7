"""Prometheus metrics of the coordinator worker (served by :mod:`streamctl.process_metrics`).

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

A metric can never fail what it measures: every observation swallows and logs its own errors.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import select
from temporalio.client import Client

from streamctl.catalog.census import take_census
from streamctl.catalog.models import Worker
from streamctl.catalog.store import catalog_engine
from streamctl.lifecycle.query_states import QueryState
from streamctl.lifecycle.worker_states import AgentState
from streamctl.process_metrics import (
    BATCH_BUCKETS,
    PASS_SECONDS_BUCKETS,
    SCRAPE_QUERY_TIMEOUT_S,
    ActivityMetrics,
    MetricsEndpoint,
    SdkMetrics,
)
from streamctl.protocol.coordinator_config import CoordinatorStatus
from streamctl.protocol.pass_io import PassResult
from streamctl.workflows.coordinator import CoordinatorWorkflow

log = logging.getLogger(__name__)

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

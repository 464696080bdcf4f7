"""Which handler applies each message kind, and which rows a batch preloads.

The handlers live with their entity (:mod:`~streamctl.domain.workers`,
:mod:`~streamctl.domain.sources`, :mod:`~streamctl.domain.sinks`,
:mod:`~streamctl.domain.queries`, ...); this table is the one place that maps a kind to its
handler. Each handler either returns the request's result (plain JSON) and records its changes
in the changelog, or raises :class:`RequestFailed` *before* changing anything, so a failed
request leaves the catalog as it was. Events return nothing. Handlers run in arrival order
within a stage, so a batch answers exactly as applying its messages one by one would.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streamctl.catalog.view import CatalogView
from streamctl.domain import (
    explain,
    history,
    quarantine,
    reoptimize,
    sinks,
    sources,
    statements,
    workers,
)
from streamctl.domain import queries as queries_stage
from streamctl.domain.context import PassContext, RequestFailed
from streamctl.domain.pass_output import PassOutput
from streamctl.domain.pass_requests import error_response
from streamctl.workflows import messages as m
from streamctl.workflows.messages import Response

log = logging.getLogger(__name__)

RequestHandler = Callable[[PassContext, Any], Any]
EventHandler = Callable[[PassContext, Any, float], None]

REQUEST_HANDLERS: dict[str, RequestHandler] = {
    m.ListWorkers.kind: workers.list_workers,
    m.GetWorker.kind: workers.get_worker,
    m.DrainWorker.kind: workers.drain_worker,
    m.CreateLogicalSource.kind: sources.create_logical_source,
    m.DropLogicalSource.kind: sources.drop_logical_source,
    m.GetLogicalSource.kind: sources.get_logical_source,
    m.ListLogicalSources.kind: sources.list_logical_sources,
    m.CreatePhysicalSource.kind: sources.create_physical_source,
    m.DropPhysicalSource.kind: sources.drop_physical_source,
    m.GetPhysicalSource.kind: sources.get_physical_source,
    m.ListPhysicalSources.kind: sources.list_physical_sources,
    m.CreateSink.kind: sinks.create_sink,
    m.DropSink.kind: sinks.drop_sink,
    m.GetSink.kind: sinks.get_sink,
    m.ListSinks.kind: sinks.list_sinks,
    m.CreateQuery.kind: queries_stage.create_query,
    m.DropQuery.kind: queries_stage.drop_query,
    m.GetQuery.kind: queries_stage.get_query,
    m.ListQueries.kind: queries_stage.list_queries,
    m.StartQuery.kind: queries_stage.start_query,
    m.StopQuery.kind: queries_stage.stop_query,
    m.ExplainQuery.kind: explain.explain_query,
    m.GetExplanation.kind: explain.get_explanation,
    m.Reoptimize.kind: reoptimize.reoptimize,
    m.ListChanges.kind: history.list_changes,
    m.ListQuarantined.kind: quarantine.list_quarantined,
    m.ExecuteStatement.kind: statements.execute_statement,
}

EVENT_HANDLERS: dict[str, EventHandler] = {
    m.RegisterWorker.kind: workers.register_worker,
    m.UnregisterWorker.kind: workers.unregister_worker,
    m.Heartbeat.kind: workers.heartbeat,
    m.CheckLiveness.kind: workers.check_liveness,
    m.Statistics.kind: queries_stage.statistics,
    m.QueryStatusChanged.kind: queries_stage.query_status_changed,
    m.SparkPlanExplained.kind: explain.spark_plan_explained,
}

assert set(REQUEST_HANDLERS) == set(m.REQUEST_TYPES), "every request kind needs a handler"
assert set(EVENT_HANDLERS) == set(m.EVENT_TYPES), "every event kind needs a handler"


def preload(view: CatalogView, messages: list[m.Message]) -> None:
    """Load, in a few bulk queries, the rows the batch's messages name."""
    workers: set[str] = set()
    logical: set[str] = set()
    physical: set[int] = set()
    sinks: set[str] = set()
    dropped_logical: set[str] = set()
    dropped_sinks: set[str] = set()
    for message in messages:
        if isinstance(
            message,
            m.RegisterWorker | m.UnregisterWorker | m.Heartbeat | m.GetWorker | m.DrainWorker,
        ):
            workers.add(message.name)
        elif isinstance(message, m.CreateLogicalSource | m.DropLogicalSource | m.GetLogicalSource):
            logical.add(message.name)
            if isinstance(message, m.DropLogicalSource):
                dropped_logical.add(message.name)
        elif isinstance(message, m.CreatePhysicalSource):
            logical.add(message.logical_source)
            if message.worker:
                workers.add(message.worker)
        elif isinstance(message, m.DropPhysicalSource | m.GetPhysicalSource):
            physical.add(message.id)
        elif isinstance(message, m.CreateSink | m.DropSink | m.GetSink):
            sinks.add(message.name)
            if isinstance(message, m.DropSink):
                dropped_sinks.add(message.name)
    view.workers.preload(workers)
    view.logical_sources.preload(logical)
    view.physical_sources.preload(physical)
    view.sinks.preload(sinks)
    # Drops check their dependents; load those for the whole batch at once.
    view.load_physical_sources_of(dropped_logical)
    view.load_queries_reading(dropped_logical)
    view.load_queries_writing(dropped_sinks)


def apply_message(
    ctx: PassContext, out: PassOutput, message: m.Message, message_id: str, received_at: float
) -> Response | None:
    """Apply one decoded message to the view: a request's answer, or None for an event.

    A refusal (:class:`RequestFailed`) is the request's answer; any other exception is the
    caller's to handle (the message may have changed the view half-way)."""
    version = out.snapshot.version
    ctx.changes.clear()
    if isinstance(message, m.Event):
        try:
            EVENT_HANDLERS[message.kind](ctx, message, received_at)
        except RequestFailed as error:
            log.warning("event %s refused: %s", message_id, error.message)
        return None
    try:
        result = REQUEST_HANDLERS[message.kind](ctx, message)
    except RequestFailed as error:
        return error_response(message_id, error.code, error.message, version)
    return out.fitted(Response(id=message_id, ok=True, result=result, version=version), message)

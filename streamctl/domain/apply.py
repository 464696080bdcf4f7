"""Applying one typed message to the pass's :class:`CatalogView`.

Each handler either returns the request's result (plain JSON) and records its changes in the
changelog, or raises :class:`RequestFailed` *before* changing anything, so a failed request
leaves the catalog as it was. Events return nothing. Handlers run in arrival order within a
stage, so a batch answers exactly as applying its messages one by one would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamctl.catalog.rows import (
    LogicalSourceRow,
    PhysicalSourceRow,
    SinkRow,
    WorkerRow,
)
from streamctl.catalog.schema import SINK_TYPES, SOURCE_TYPES
from streamctl.catalog.view import CatalogView
from streamctl.domain import explain, history, inline, quarantine, reoptimize, statements
from streamctl.domain import queries as queries_stage
from streamctl.domain.context import PassContext, RequestFailed
from streamctl.domain.paths import confine_sink_options, confine_source_options
from streamctl.domain.validate import checked_kind as _kind
from streamctl.domain.validate import checked_name as _name
from streamctl.domain.validate import checked_schema as _schema
from streamctl.domain.validate import connector_options as _options
from streamctl.domain.validate import not_found as _not_found
from streamctl.lifecycle.agents import (
    AgentState,
    AgentTrigger,
    can_transition,
    transition,
)
from streamctl.planner.connectors.options import (
    normalize_sink_options,
    normalize_source_options,
    redact,
)
from streamctl.workflows import messages as m
from streamctl.workflows.actions import AgentAction
from streamctl.workflows.messages import ErrorCode

# --- row rendering ---------------------------------------------------------------------------
# Every answer that shows a source or a sink is built here, so this is the one place where
# secret option values (passwords, credentials) are masked: the catalog keeps them (agents need
# them) but no answer, listing or frontend ever shows them.


def worker_json(row: WorkerRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "state": row.state,
        "capacity": row.capacity,
        "load": row.load,
        "task_queue": row.task_queue,
        "address": row.address,
        "draining": row.draining,
        "last_heartbeat_at": row.last_heartbeat_at,
        "heartbeats": row.heartbeats,
        "created_version": row.created_version,
    }


def logical_source_json(row: LogicalSourceRow) -> dict[str, Any]:
    return {"name": row.name, "schema": row.schema, "created_version": row.created_version}


def physical_source_json(row: PhysicalSourceRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "logical_source": row.logical_source,
        "type": row.type,
        "config": redact(row.type, row.config),
        "worker": row.worker,
        "created_version": row.created_version,
    }


def sink_json(row: SinkRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "schema": row.schema,
        "type": row.type,
        "config": redact(row.type, row.config),
        "created_version": row.created_version,
    }


# --- workers (stage 1) -----------------------------------------------------------------------


def _agent_transition(ctx: PassContext, row: WorkerRow, trigger: AgentTrigger, reason: str) -> None:
    before = AgentState(row.state)
    after = transition(before, trigger)
    if after is not before:
        row.state = after
        ctx.stamp(row)
        ctx.record("worker", row.name, f"{before}->{after}", reason)
        if after in (AgentState.DEAD, AgentState.UNREGISTERED):
            queries_stage.agent_lost(ctx, row.name, f"is {after}")


def register_worker(ctx: PassContext, event: m.RegisterWorker, received_at: float) -> None:
    name = _name(event.name, "worker name")
    row = ctx.view.workers.get(name)
    if row is None:
        row = WorkerRow(
            name=name,
            state=transition(None, AgentTrigger.REGISTER),
            capacity=max(0, event.capacity),
            load=0,
            task_queue=event.task_queue or f"agent.{name}",
            address=event.address,
            draining=False,
            registered_at=received_at,
            last_heartbeat_at=received_at,
            heartbeats=0,
            created_version=ctx.view.version,
            updated_version=ctx.view.version,
        )
        ctx.view.workers.add(row)
        ctx.record("worker", name, "register", "RegisterWorker from a new agent")
        return
    was_serving = row.state in (AgentState.ALIVE, AgentState.SUSPECT)
    _agent_transition(ctx, row, AgentTrigger.REGISTER, "RegisterWorker from a known agent")
    row.capacity = max(0, event.capacity)
    row.task_queue = event.task_queue or row.task_queue
    row.address = event.address or row.address
    row.registered_at = received_at
    row.last_heartbeat_at = received_at
    row.draining = False
    ctx.stamp(row)
    if was_serving:  # it may have restarted and lost its queries
        queries_stage.agent_registered_again(ctx, row.name)
    else:  # its queries moved while it was gone; stop whatever it still runs
        ctx.actions.append(AgentAction(row.name, reconcile=True))


def unregister_worker(ctx: PassContext, event: m.UnregisterWorker, _received_at: float) -> None:
    row = ctx.view.workers.get(event.name)
    if row is None or not can_transition(AgentState(row.state), AgentTrigger.UNREGISTER):
        return
    _agent_transition(ctx, row, AgentTrigger.UNREGISTER, "UnregisterWorker from the agent")


def heartbeat(ctx: PassContext, event: m.Heartbeat, received_at: float) -> None:
    row = ctx.view.workers.get(event.name)
    if row is None:
        return  # an unknown agent must register first; its heartbeat means nothing
    if row.state == AgentState.DEAD:
        # Declared dead during a stall longer than dead_after, yet alive: it comes back as if
        # it registered again. Its queries moved meanwhile; what it still runs is reconciled.
        _agent_transition(ctx, row, AgentTrigger.REGISTER, "heartbeat from an agent declared dead")
        ctx.actions.append(AgentAction(row.name, reconcile=True))
    elif can_transition(AgentState(row.state), AgentTrigger.HEARTBEAT):
        _agent_transition(ctx, row, AgentTrigger.HEARTBEAT, "heartbeat after missed ones")
    else:
        return  # it said goodbye; a heartbeat still in flight does not bring it back
    row.heartbeats += max(1, event.count)
    row.load = max(0, event.load)
    if event.capacity is not None:
        row.capacity = max(0, event.capacity)
    row.last_heartbeat_at = max(row.last_heartbeat_at, _newest_arrival(ctx, event, received_at))


def _newest_arrival(ctx: PassContext, event: m.Heartbeat, received_at: float) -> float:
    """When the newest heartbeat this event stands for arrived: ``received_at`` is the oldest
    one's (merged heartbeats queue there), ``arrived_last`` the newest's, bounded by both that
    and the pass's clock (no heartbeat of this pass arrived after the pass began)."""
    newest = event.arrived_last
    if newest is None:
        return received_at
    return min(max(received_at, newest), ctx.view.now)


STALL_TOLERANCE = 1.0
"""A liveness timer seen this late (seconds) means the coordinator itself stalled."""


def check_liveness(ctx: PassContext, event: m.CheckLiveness, _received_at: float) -> None:
    stalled = event.late_by if event.late_by > STALL_TOLERANCE else 0.0
    for row in ctx.view.live_workers():
        if stalled:
            # The coordinator could not hear anyone while it stalled (its workers or the
            # Temporal server were down, and the agents' heartbeats are still on their way):
            # that time does not count against the agent, whose liveness clock moves on by it,
            # and by at least enough for the heartbeats sent meanwhile to arrive (half a
            # suspect interval). An agent that died is found that much later, never sooner.
            credited = max(
                row.last_heartbeat_at + stalled,
                ctx.view.now - ctx.liveness.suspect_after / 2,
            )
            row.last_heartbeat_at = min(ctx.view.now, credited)
            ctx.stamp(row)
        age = ctx.view.now - row.last_heartbeat_at
        trigger = ctx.liveness.trigger_for_age(age)
        if trigger is None or not can_transition(AgentState(row.state), trigger):
            continue
        _agent_transition(ctx, row, trigger, f"no heartbeat for {age:.1f}s")


def list_workers(ctx: PassContext, _request: m.ListWorkers) -> Any:
    return [worker_json(row) for row in sorted(ctx.view.workers.all(), key=lambda r: r.name)]


def get_worker(ctx: PassContext, request: m.GetWorker) -> Any:
    row = ctx.view.workers.get(request.name)
    if row is None:
        raise _not_found("worker", request.name)
    return worker_json(row)


def drain_worker(ctx: PassContext, request: m.DrainWorker) -> Any:
    row = ctx.view.workers.get(request.name)
    if row is None:
        raise _not_found("worker", request.name)
    if not row.draining:
        row.draining = True
        ctx.stamp(row)
        ctx.record("worker", row.name, "drain", "DrainWorker: no new queries are placed here")
    return worker_json(row)


def declare_worker(ctx: PassContext, name: str, capacity: int) -> Any:
    """``CREATE WORKER``: a worker known before its agent registers (physical sources may be
    pinned to it); it is ``UNREGISTERED`` until an agent of that name registers."""
    name = _name(name, "worker name")
    if ctx.view.workers.get(name) is not None:
        raise RequestFailed(ErrorCode.ALREADY_EXISTS, f"worker {name!r} already exists")
    row = WorkerRow(
        name=name,
        state=transition(None, AgentTrigger.DECLARE),
        capacity=max(0, capacity),
        load=0,
        task_queue=f"agent.{name}",
        address="",
        draining=False,
        registered_at=ctx.view.now,
        last_heartbeat_at=ctx.view.now,
        heartbeats=0,
        created_version=ctx.view.version,
        updated_version=ctx.view.version,
    )
    ctx.view.workers.add(row)
    ctx.record("worker", name, "declare", "CREATE WORKER")
    return worker_json(row)


def drop_worker(ctx: PassContext, name: str, cascade: bool) -> Any:
    """``DROP WORKER``: forget a worker whose agent is not serving; ``cascade`` also drops the
    physical sources pinned to it."""
    row = ctx.view.workers.get(name)
    if row is None:
        raise _not_found("worker", name)
    if row.state in (AgentState.ALIVE, AgentState.SUSPECT):
        raise RequestFailed(
            ErrorCode.HAS_DEPENDENTS,
            f"worker {name!r} is {row.state}: stop its agent (streamctl down, or SIGTERM to "
            "streamctl agent) before dropping it",
        )
    placed = ctx.view.queries_on(name, [str(state) for state in queries_stage.S])
    if placed:
        raise RequestFailed(
            ErrorCode.HAS_DEPENDENTS,
            f"worker {name!r} is the last placement of query(ies) "
            f"{', '.join(str(q.id) for q in placed)}; drop them first",
        )
    pinned = [s for s in ctx.view.physical_sources.all() if s.worker == name]
    if pinned and not cascade:
        raise RequestFailed(
            ErrorCode.HAS_DEPENDENTS,
            f"worker {name!r} has {len(pinned)} physical source(s) pinned to it; drop them "
            "first or ask for CASCADE",
        )
    for source in pinned:
        ctx.view.physical_sources.remove(source.id)
        ctx.record("physical_source", source.id, "drop", f"CASCADE from worker {name!r}")
    ctx.view.workers.remove(name)
    ctx.record("worker", name, "drop", "DROP WORKER")
    return {"workers": [name], "physical_sources": sorted(source.id for source in pinned)}


# --- logical sources (stage 2) --------------------------------------------------------------


def create_logical_source(ctx: PassContext, request: m.CreateLogicalSource) -> Any:
    name = _name(request.name, "logical source name")
    schema = _schema(request.schema)
    if ctx.view.logical_sources.get(name) is not None:
        raise RequestFailed(ErrorCode.ALREADY_EXISTS, f"logical source {name!r} already exists")
    row = LogicalSourceRow(
        name=name,
        schema=schema,
        created_version=ctx.view.version,
        updated_version=ctx.view.version,
    )
    ctx.view.logical_sources.add(row)
    ctx.record("logical_source", name, "create", "CreateLogicalSource")
    return logical_source_json(row)


def drop_logical_source(ctx: PassContext, request: m.DropLogicalSource) -> Any:
    row = ctx.view.logical_sources.get(request.name)
    if row is None:
        raise _not_found("logical source", request.name)
    inline.refuse_drop(f"logical source {row.name!r}", row.name)
    physical = ctx.view.physical_sources_of(row.name)
    queries = ctx.view.queries_reading(row.name)
    if (physical or queries) and not request.cascade:
        raise RequestFailed(
            ErrorCode.HAS_DEPENDENTS,
            f"logical source {row.name!r} has {len(physical)} physical source(s) and "
            f"{len(queries)} query(ies); drop them first or ask for CASCADE",
        )
    dropped = queries_stage.drop_queries(ctx, queries, f"CASCADE from logical source {row.name!r}")
    for source in physical:
        ctx.view.physical_sources.remove(source.id)
        ctx.record("physical_source", source.id, "drop", f"CASCADE from {row.name!r}")
    ctx.view.logical_sources.remove(row.name)
    ctx.record("logical_source", row.name, "drop", "DropLogicalSource")
    return {
        "logical_sources": [row.name],
        "physical_sources": sorted(source.id for source in physical),
        "queries": dropped,
    }


def get_logical_source(ctx: PassContext, request: m.GetLogicalSource) -> Any:
    row = ctx.view.logical_sources.get(request.name)
    if row is None:
        raise _not_found("logical source", request.name)
    return logical_source_json(row)


def list_logical_sources(ctx: PassContext, _request: m.ListLogicalSources) -> Any:
    rows = sorted(ctx.view.logical_sources.all(), key=lambda r: r.name)
    return [logical_source_json(row) for row in rows]


# --- physical sources (stage 2) -------------------------------------------------------------


def create_physical_source(ctx: PassContext, request: m.CreatePhysicalSource) -> Any:
    source_type = _kind(request.type, SOURCE_TYPES, "physical source")
    if ctx.view.logical_sources.get(request.logical_source) is None:
        raise _not_found("logical source", request.logical_source)
    if request.worker is not None and ctx.view.workers.get(request.worker) is None:
        raise _not_found("worker", request.worker)
    options = confine_source_options(
        source_type,
        _options(normalize_source_options, source_type, request.config),
        f"the {source_type} source's",
    )
    ctx.view.load_physical_sources_of([request.logical_source])
    row = PhysicalSourceRow(
        id=ctx.view.next_id("physical_source"),
        logical_source=request.logical_source,
        type=source_type,
        config=options,
        worker=request.worker,
        created_version=ctx.view.version,
        updated_version=ctx.view.version,
    )
    ctx.view.physical_sources.add(row)
    ctx.record(
        "physical_source", row.id, "create", f"CreatePhysicalSource for {row.logical_source!r}"
    )
    return physical_source_json(row)


def drop_physical_source(ctx: PassContext, request: m.DropPhysicalSource) -> Any:
    row = ctx.view.physical_sources.get(request.id)
    if row is None:
        raise _not_found("physical source", request.id)
    inline.refuse_drop(f"physical source {row.id} (of {row.logical_source!r})", row.logical_source)
    ctx.view.physical_sources.remove(row.id)
    ctx.record("physical_source", row.id, "drop", "DropPhysicalSource")
    return {"physical_sources": [row.id]}


def get_physical_source(ctx: PassContext, request: m.GetPhysicalSource) -> Any:
    row = ctx.view.physical_sources.get(request.id)
    if row is None:
        raise _not_found("physical source", request.id)
    return physical_source_json(row)


def list_physical_sources(ctx: PassContext, request: m.ListPhysicalSources) -> Any:
    if request.logical_source is None:
        rows = ctx.view.physical_sources.all()
    else:
        if ctx.view.logical_sources.get(request.logical_source) is None:
            raise _not_found("logical source", request.logical_source)
        rows = ctx.view.physical_sources_of(request.logical_source)
    return [physical_source_json(row) for row in sorted(rows, key=lambda r: r.id)]


# --- sinks (stage 2) -----------------------------------------------------------------------


def create_sink(ctx: PassContext, request: m.CreateSink) -> Any:
    name = _name(request.name, "sink name")
    schema = _schema(request.schema)
    sink_type = _kind(request.type, SINK_TYPES, "sink")
    if ctx.view.sinks.get(name) is not None:
        raise RequestFailed(ErrorCode.ALREADY_EXISTS, f"sink {name!r} already exists")
    options = confine_sink_options(
        sink_type,
        _options(normalize_sink_options, sink_type, request.config),
        f"the {sink_type} sink {name!r}: its",
    )
    row = SinkRow(
        name=name,
        schema=schema,
        type=sink_type,
        config=options,
        created_version=ctx.view.version,
        updated_version=ctx.view.version,
    )
    ctx.view.sinks.add(row)
    ctx.record("sink", name, "create", "CreateSink")
    return sink_json(row)


def drop_sink(ctx: PassContext, request: m.DropSink) -> Any:
    row = ctx.view.sinks.get(request.name)
    if row is None:
        raise _not_found("sink", request.name)
    inline.refuse_drop(f"sink {row.name!r}", row.name)
    queries = ctx.view.queries_writing(row.name)
    if queries and not request.cascade:
        raise RequestFailed(
            ErrorCode.HAS_DEPENDENTS,
            f"sink {row.name!r} is written by {len(queries)} query(ies); "
            "drop them first or ask for CASCADE",
        )
    dropped = queries_stage.drop_queries(ctx, queries, f"CASCADE from sink {row.name!r}")
    ctx.view.sinks.remove(row.name)
    ctx.record("sink", row.name, "drop", "DropSink")
    return {"sinks": [row.name], "queries": dropped}


def get_sink(ctx: PassContext, request: m.GetSink) -> Any:
    row = ctx.view.sinks.get(request.name)
    if row is None:
        raise _not_found("sink", request.name)
    return sink_json(row)


def list_sinks(ctx: PassContext, _request: m.ListSinks) -> Any:
    return [sink_json(row) for row in sorted(ctx.view.sinks.all(), key=lambda r: r.name)]


RequestHandler = Callable[[PassContext, Any], Any]
EventHandler = Callable[[PassContext, Any, float], None]

REQUEST_HANDLERS: dict[str, RequestHandler] = {
    m.ListWorkers.kind: list_workers,
    m.GetWorker.kind: get_worker,
    m.DrainWorker.kind: drain_worker,
    m.CreateLogicalSource.kind: create_logical_source,
    m.DropLogicalSource.kind: drop_logical_source,
    m.GetLogicalSource.kind: get_logical_source,
    m.ListLogicalSources.kind: list_logical_sources,
    m.CreatePhysicalSource.kind: create_physical_source,
    m.DropPhysicalSource.kind: drop_physical_source,
    m.GetPhysicalSource.kind: get_physical_source,
    m.ListPhysicalSources.kind: list_physical_sources,
    m.CreateSink.kind: create_sink,
    m.DropSink.kind: drop_sink,
    m.GetSink.kind: get_sink,
    m.ListSinks.kind: list_sinks,
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
    m.ExecuteStatement.kind: lambda ctx, request: statements.execute_statement(
        ctx, request, REQUEST_HANDLERS, declare_worker, drop_worker
    ),
}

EVENT_HANDLERS: dict[str, EventHandler] = {
    m.RegisterWorker.kind: register_worker,
    m.UnregisterWorker.kind: unregister_worker,
    m.Heartbeat.kind: heartbeat,
    m.CheckLiveness.kind: check_liveness,
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

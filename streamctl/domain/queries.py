"""Queries in a pass (stage 3): create, start, stop, drop, agent reports, placement.

Protocol within a pass
----------------------
* ``CreateQuery`` parses the statement (NebulaStream dialect), binds it against the catalog as
  this pass sees it, turns inline sources and sinks into catalog objects owned by the query
  (:mod:`streamctl.domain.inline`), so the stored plan reads catalog sources into a
  catalog sink only, and tries to place and start the query at once.
* Every change of a query's current state, with the fields that go with its new state, is one
  transition function of :mod:`streamctl.lifecycle.query_states` (``lifecycle``); a report that
  does not fit the state (a duplicate, a late one) changes nothing. This module keeps the
  pass's side: placement, agent actions, changelog records, stamping the row.
* Starting a query means: pick an agent (:func:`streamctl.planner.placement.place`), move the
  query to ``STARTING`` (:func:`streamctl.lifecycle.query_states.start`: ``run + 1``), and add a
  ``start`` :class:`AgentAction`. Stopping adds a ``stop`` action. The workflow runs the
  actions as activities on the agents' task queues and feeds their outcomes back as
  ``QueryStatusChanged`` events, like the agents' own reports.
* At the end of every pass, :func:`schedule` starts the queries that wait for an agent
  (``CREATED``, ``RECOVERING`` whose backoff has passed, or ``STOPPED`` with the desired
  state ``RUNNING``: in the middle of a move, or a ``StartQuery`` that came to a pass without
  room for more starts).
* A stop report for a query whose desired state is still ``RUNNING`` ends a move
  (:mod:`streamctl.domain.reoptimize`): the query starts on another agent at once.
* A report carries its agent and run; one from another agent or an earlier run is stale and
  ignored, except that an agent running a query the catalog does not want there is told to
  stop it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamctl.catalog.rows import QueryRow, SinkRow
from streamctl.catalog.view import CatalogView
from streamctl.domain import inline
from streamctl.domain.context import PassContext, RequestFailed
from streamctl.domain.listing import listing
from streamctl.error_codes import INVALID_STATEMENT, ErrorCode
from streamctl.lifecycle import query_states as lifecycle
from streamctl.lifecycle.query_states import (
    QueryState,
    QueryTrigger,
    can_transition,
)
from streamctl.limits import INT64_MAX, INT64_MIN
from streamctl.planner import ast
from streamctl.planner.binder import BoundQuery, bind_query
from streamctl.planner.catalog_lookup import LogicalSourceInfo, SinkInfo
from streamctl.planner.parser import parse_query
from streamctl.planner.placement import AgentSlots, Placement, place
from streamctl.planner.planning_errors import PlannerError
from streamctl.planner.reoptimization import track_lag
from streamctl.protocol import answers
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import (
    AgentAction,
    AgentStatus,
    QueryAssignment,
    SinkAssignment,
    SourceAssignment,
    StopAssignment,
)
from streamctl.secret_options import redact_statement

S = QueryState
T = QueryTrigger

REPORT_TRIGGERS: dict[str, QueryTrigger] = {
    AgentStatus.RUNNING: T.STARTED,
    AgentStatus.FINISHED: T.INPUT_DONE,
    AgentStatus.STOPPED: T.STOPPED,
    AgentStatus.CRASHED: T.CRASHED,
}

ON_AN_AGENT = (S.STARTING, S.RUNNING, S.STOPPING)
"""States in which a query is (or is being made) present on its agent."""


def query_json(row: QueryRow) -> answers.Query:
    return {
        "id": row.id,
        "statement": redact_statement(row.statement),  # inline sinks may carry a password
        "sink": row.sink,
        "desired_state": row.desired_state,
        "current_state": row.current_state,
        "worker": row.worker,
        "error": row.error,
        "run": row.run,
        "restarts": row.restarts,
        "retry_at": row.retry_at,
        "statistics": row.statistics,
        "statistics_at": row.statistics_at,
        "created_version": row.created_version,
    }


def _query(ctx: PassContext, query_id: int) -> QueryRow:
    """The query a request names, or its NOT_FOUND refusal."""
    row = ctx.view.queries.get(query_id)
    if row is None:
        raise RequestFailed(ErrorCode.NOT_FOUND, f"query {query_id!r} does not exist")
    return row


# --- binding --------------------------------------------------------------------------------


class _ViewCatalog:
    """The binder's catalog interface over the pass's view."""

    def __init__(self, ctx: PassContext) -> None:
        self._view = ctx.view

    def logical_source(self, name: str) -> LogicalSourceInfo | None:
        row = self._view.find_logical_source(name)
        if row is None:
            return None
        return LogicalSourceInfo(row.name, [m.ColumnSpec(**c) for c in row.schema])

    def sink(self, name: str) -> SinkInfo | None:
        row = self._view.find_sink(name)
        if row is None:
            return None
        return SinkInfo(row.name, [m.ColumnSpec(**c) for c in row.schema], row.type, row.config)


def parse(statement: str | ast.QueryStatement) -> ast.QueryStatement:
    """The syntax tree of a query statement (given parsed, it is returned as it is)."""
    if isinstance(statement, ast.QueryStatement):
        return statement
    if not isinstance(statement, str):
        raise RequestFailed(ErrorCode.INVALID_REQUEST, "the query statement must be text")
    if not statement.strip():
        raise RequestFailed(ErrorCode.INVALID_REQUEST, "the query statement is empty")
    try:
        return parse_query(statement)
    except PlannerError as error:
        raise RequestFailed(error.code, error.message) from None


def bind(
    ctx: PassContext, statement: ast.QueryStatement, *, allow_missing_sink: bool = False
) -> BoundQuery:
    """Bind ``statement`` against the pass's catalog; refuse what the coordinator cannot run.
    Inline sources and sinks stay inline (:func:`streamctl.domain.inline.materialize`
    turns them into catalog objects)."""
    try:
        bound = bind_query(statement, _ViewCatalog(ctx), allow_missing_sink=allow_missing_sink)
    except PlannerError as error:
        raise RequestFailed(error.code, error.message) from None
    for name in bound.logical_sources:
        if not ctx.view.physical_sources_of(name):
            raise RequestFailed(
                INVALID_STATEMENT,
                f"logical source {name!r} has no physical source; create one before a query "
                "reads it",
            )
    return bound


# --- requests -------------------------------------------------------------------------------


def create_query(ctx: PassContext, request: m.CreateQuery) -> answers.Query:
    return create(ctx, request.statement, request.sink)


def create(
    ctx: PassContext,
    text: str,
    sink: str | None = None,
    parsed: ast.QueryStatement | None = None,
) -> answers.Query:
    """Create (and try to start) the query ``text``; ``parsed`` is its syntax tree when the
    caller parsed it as part of a longer script (its positions point into the script)."""
    statement = parse(text if parsed is None else parsed)
    bound = bind(ctx, statement)
    if sink is not None and sink.casefold() != (bound.sink_name or "").casefold():
        target = repr(bound.sink_name) if bound.sink_name else "a sink defined inline"
        raise RequestFailed(
            ErrorCode.INVALID_REQUEST,
            f"the statement writes INTO {target} but the request names sink {sink!r}",
        )
    view = ctx.view
    query_id = view.peek_id("query")
    objects = inline.prepare(ctx, statement, bound, query_id)  # checks; nothing changes yet
    view.next_id("query")  # take the id the inline objects are named after
    bound = inline.materialize(ctx, objects, query_id)
    assert bound.sink_name is not None
    row = QueryRow(
        id=query_id,
        statement=text,
        sink=bound.sink_name,
        desired_state=S.RUNNING,
        **lifecycle.created(),
        plan=bound.plan.to_json_text(),
        statistics=None,
        statistics_at=None,
        created_version=view.version,
        updated_version=view.version,
    )
    view.queries.add(row)
    view.add_query_sources(row.id, bound.logical_sources)
    ctx.record("query", row.id, "create", f"CreateQuery reading {', '.join(bound.logical_sources)}")
    try_start(ctx, row, "CreateQuery")
    return query_json(row)


def start_query(ctx: PassContext, request: m.StartQuery) -> answers.Query:
    row = _query(ctx, request.id)
    state = S(row.current_state)
    if state in (S.STOPPED, S.FAILED, S.FINISHED):
        room = ctx.can_start_more()
        placement = _placement(ctx, row)
        if placement is None:
            raise RequestFailed(
                ErrorCode.UNAVAILABLE,
                f"query {row.id} cannot start now: no alive agent has free capacity",
            )
        if not room:
            # This pass may start no more queries (the workflow's room for starts is taken,
            # or its run drains for continue-as-new). A STOPPED query waits with its desired
            # state RUNNING, as a created one waits CREATED, and a later pass with room starts
            # it (schedule); answering UNAVAILABLE failed a user's start for the coordinator's
            # own bookkeeping. A FAILED query keeps its desired state RUNNING when its
            # restarts ran out, so it cannot wait that way: the user starts it again (not
            # ASK_AGAIN, which only answers that are never stored may end with).
            if state is not S.STOPPED:
                raise RequestFailed(
                    ErrorCode.UNAVAILABLE,
                    f"query {row.id} cannot start now: "
                    "this pass has started as many queries as it can; start it again",
                )
            row.desired_state = S.RUNNING
            row.restarts = 0  # a user's start counts its restarts from 0 again, as start_on's
            ctx.stamp(row)
            ctx.record("query", row.id, "start", "StartQuery: waits for a pass with room")
            return query_json(row)
        row.desired_state = S.RUNNING
        start_on(ctx, row, placement, "StartQuery", fresh_budget=True)
    elif row.desired_state != S.RUNNING:
        row.desired_state = S.RUNNING
        ctx.stamp(row)
    return query_json(row)


def stop_query(ctx: PassContext, request: m.StopQuery) -> answers.Query:
    row = _query(ctx, request.id)
    row.desired_state = S.STOPPED
    _stop(ctx, row, "StopQuery")
    ctx.stamp(row)
    return query_json(row)


def drop_query(ctx: PassContext, request: m.DropQuery) -> answers.QueryDropped:
    row = _query(ctx, request.id)
    return {"queries": drop_queries(ctx, [row], "DropQuery")}


def drop_queries(ctx: PassContext, queries: list[QueryRow], reason: str) -> list[int]:
    """Remove the queries from the catalog, telling their agents to stop them first."""
    for row in queries:
        if row.worker is not None and row.current_state in ON_AN_AGENT:
            ctx.actions.append(AgentAction(row.worker, stop=StopAssignment(row.id, row.run)))
        ctx.view.queries.remove(row.id)
        ctx.dropped(row)
        ctx.record("query", row.id, "drop", reason)
        inline.drop_owned(ctx, row.id, f"{reason}: query {row.id} defined it inline")
    return sorted(row.id for row in queries)


def get_query(ctx: PassContext, request: m.GetQuery) -> answers.QueryDetail:
    row = _query(ctx, request.id)
    return {**query_json(row), "sources": ctx.view.sources_of_query(row.id), "plan": row.plan}


def watched(view: CatalogView, query_ids: list[int]) -> list[dict[str, Any]]:
    """What a pass reports to ``wait_query`` waiters: each existing query's row without its
    statement (the waiter has it; it may be large). An id no query can have (beyond 64 bits)
    has no row: looking it up would fail the pass, and every pass after it."""
    rows = (
        view.queries.get(query_id)
        for query_id in query_ids
        if type(query_id) is int and INT64_MIN <= query_id <= INT64_MAX
    )
    return [
        {key: value for key, value in query_json(row).items() if key != "statement"}
        for row in rows
        if row is not None
    ]


def list_queries(ctx: PassContext, request: m.ListQueries) -> list[answers.Query] | answers.Page:
    return listing(ctx.view.queries, request.limit, request.after, query_json, request.kind)


# --- reports from agents (events) -------------------------------------------------------------


def query_status_changed(ctx: PassContext, event: m.QueryStatusChanged, received_at: float) -> None:
    row = ctx.view.queries.get(event.query_id)
    from_its_agent = row is not None and (not event.agent or event.agent == row.worker)
    if row is None or not from_its_agent or event.run < row.run:
        if event.status == AgentStatus.RUNNING and event.agent:
            # An agent runs a query the catalog does not want there (dropped, moved away).
            ctx.actions.append(
                AgentAction(event.agent, stop=StopAssignment(event.query_id, event.run))
            )
            ctx.record("query", event.query_id, "stop-stray", f"runs on {event.agent} unwanted")
        return
    trigger = REPORT_TRIGGERS.get(event.status)
    before = S(row.current_state)
    if before is S.STOPPING and event.run == row.run:
        if event.status == AgentStatus.RUNNING:
            _stop_again(ctx, row, f"{event.agent or 'its agent'} still runs run {row.run}")
            return
        if trigger is T.CRASHED and not lifecycle.from_a_failed_start(event.error or ""):
            # The agent reports the run ended by itself while its stop was under way (its
            # Spark died): nothing runs any more, which is what the stop was for. Not the
            # workflow's report of a start that failed: that start may still land, and only
            # the stop's answer says the run is gone. (A run whose input ended is FINISHED,
            # even while being moved: there is nothing left to run elsewhere.)
            trigger = T.STOPPED
    if trigger is None or not can_transition(before, trigger):
        return  # a duplicate or late report: the query has moved on
    now = ctx.view.now
    if trigger is T.CRASHED:
        _crashed(ctx, row, event.error or "the query terminated with an error", now)
        return
    left = row.worker
    if trigger is T.STARTED:
        step = lifecycle.started(row, now)
    elif trigger is T.INPUT_DONE:
        step = lifecycle.finished(row)
    else:
        step = lifecycle.stopped(row)
    ctx.stamp(row)
    ctx.record("query", row.id, step.action, f"{event.agent or 'agent'} reported {event.status}")
    if step.after is S.STOPPED and row.desired_state == S.RUNNING:
        # A move (streamctl.domain.reoptimize): stopped where it was, it starts elsewhere
        # (or, without room for its start now, from schedule() in a later pass).
        if not ctx.can_start_more():
            return
        placement = _placement(ctx, row, exclude=[left] if left else [])
        if placement is not None:
            start_on(ctx, row, placement, f"moved off {left}")


def statistics(ctx: PassContext, event: m.Statistics, received_at: float) -> None:
    """Keep the latest progress of a running query and its lag streak (not in the changelog:
    it is not a change of the deployment, and it arrives every few seconds per query)."""
    row = ctx.view.queries.get(event.query_id)
    if row is None or row.current_state != S.RUNNING or not isinstance(event.values, dict):
        return
    values = {str(k): v for k, v in event.values.items() if isinstance(v, int | float)}
    row.statistics = track_lag(row.statistics, values)
    row.statistics_at = received_at


def _crashed(ctx: PassContext, row: QueryRow, error: str, now: float) -> None:
    step, reason = lifecycle.crash(row, error, now, ctx.restarts)
    ctx.stamp(row)
    ctx.record("query", row.id, step.action, f"{reason}: {error}"[:2000])


def agent_lost(ctx: PassContext, agent: str, reason: str) -> None:
    """The agent is gone (DEAD or unregistered): its queries recover elsewhere at once."""
    for row in ctx.view.queries_on(agent, ON_AN_AGENT):
        step = lifecycle.agent_lost(row, ctx.view.now)
        ctx.stamp(row)
        ctx.record("query", row.id, step.action, f"{agent} {reason}")


def agent_registered_again(ctx: PassContext, agent: str) -> None:
    """A known agent registered again (it may have restarted and lost its queries): start its
    queries there again (starting is idempotent), stop again those it was stopping, and ask
    it what it runs, so that strays are stopped."""
    for row in ctx.view.queries_on(agent, (S.STARTING, S.RUNNING)):
        assignment = _assignment(ctx, row, row.run + 1)
        lifecycle.rerun(row)
        ctx.stamp(row)
        ctx.actions.append(AgentAction(agent, start=assignment))
        ctx.record("query", row.id, "restart", f"{agent} registered again: make sure it runs")
    for row in ctx.view.queries_on(agent, (S.STOPPING,)):
        # A restarted agent no longer has the run, and reports nothing of it: its answer to
        # the stop (STOPPED, or the stop done) settles the query now.
        _stop_again(ctx, row, f"{agent} registered again: make sure it stops", due=True)
    ctx.actions.append(AgentAction(agent, reconcile=True))


# --- placement ------------------------------------------------------------------------------


def schedule(ctx: PassContext) -> None:
    """Start the queries waiting for an agent (called once at the end of every pass)."""
    now = ctx.view.now
    waiting = [
        row
        for row in ctx.view.queries_in_states((S.CREATED, S.RECOVERING)) + _moves_waiting(ctx)
        if row.desired_state == S.RUNNING and (row.retry_at is None or row.retry_at <= now)
    ]
    ctx.view.load_sources_of_queries(row.id for row in waiting)
    for row in sorted(waiting, key=lambda r: r.id):
        try_start(ctx, row, "waiting for an agent")


def _moves_waiting(ctx: PassContext) -> list[QueryRow]:
    """``STOPPED`` queries whose desired state is ``RUNNING``: moves whose target had no room
    when the stop came, and ``StartQuery`` requests of passes without room for starts (loaded
    by both states: all stopped queries may be many)."""
    columns = QueryRow.TABLE.c
    ctx.view.queries.absorb_where(
        columns.current_state == S.STOPPED, columns.desired_state == S.RUNNING
    )
    return [
        row
        for row in ctx.view.queries.all_loaded()
        if row.current_state == S.STOPPED and row.desired_state == S.RUNNING
    ]


def try_start(ctx: PassContext, row: QueryRow, reason: str) -> bool:
    if not ctx.can_start_more():
        # Left waiting (CREATED, or as it was) for the next pass, which the pass asks for
        # at once: one pass's start actions must fit its result (limits.MAX_PASS_ACTION_BYTES).
        return False
    placement = _placement(ctx, row)
    if placement is None:
        row.error = row.error or "waiting for an alive agent with free capacity"
        return False
    start_on(ctx, row, placement, reason)
    return True


def start_on(
    ctx: PassContext,
    row: QueryRow,
    placement: Placement,
    reason: str,
    *,
    fresh_budget: bool = False,
) -> None:
    """Start ``row`` where ``placement`` says; ``fresh_budget`` (a user's ``StartQuery``, a
    reoptimization's restart) counts its restarts from 0 again."""
    assignment = _assignment(ctx, row, row.run + 1)
    step = lifecycle.start(row, placement.agent, fresh_budget=fresh_budget)
    ctx.stamp(row)
    ctx.add_action(AgentAction(placement.agent, start=assignment))
    where = f"{placement.agent} (local to its sources)" if placement.local else placement.agent
    ctx.record("query", row.id, step.action, f"{reason}: placed on {where}")


def _stop(ctx: PassContext, row: QueryRow, reason: str) -> None:
    if not can_transition(S(row.current_state), T.STOP):
        return
    step, agent = lifecycle.stop(row, ctx.view.now)
    if agent is not None:
        ctx.actions.append(AgentAction(agent, stop=StopAssignment(row.id, row.run)))
    ctx.record("query", row.id, step.action, reason)


def _stop_again(ctx: PassContext, row: QueryRow, reason: str, *, due: bool = False) -> None:
    """The run a stop was sent for still runs (the workflow's retries of that stop gave up:
    its agent answered with errors, or was too busy to take it), or its agent registered
    again (``due``). Send the stop again, at most once per ``STOP_AGAIN_AFTER`` unless
    ``due``, so that the query does not stay ``STOPPING`` for ever."""
    if row.worker is None:
        return
    step = lifecycle.stop_again(row, ctx.view.now, due=due)
    if step is None:
        return
    ctx.stamp(row)
    ctx.actions.append(AgentAction(row.worker, stop=StopAssignment(row.id, row.run)))
    ctx.record("query", row.id, "stop-again", reason)


def _placement(ctx: PassContext, row: QueryRow, exclude: Iterable[str] = ()) -> Placement | None:
    pinned = pinned_agents(ctx, ctx.view.sources_of_query(row.id))
    return place(agent_slots(ctx), pinned, exclude)


def agent_slots(ctx: PassContext) -> list[AgentSlots]:
    active = ctx.active_by_agent()
    return [
        AgentSlots(w.name, w.state, w.capacity, w.draining, active.get(w.name, 0))
        for w in ctx.view.workers.all()
    ]


def pinned_agents(ctx: PassContext, logical_sources: Any) -> list[str]:
    return [
        source.worker
        for name in logical_sources
        for source in ctx.view.physical_sources_of(name)
        if source.worker is not None
    ]


def _assignment(ctx: PassContext, row: QueryRow, run: int) -> QueryAssignment:
    sink = ctx.view.sinks.get(row.sink)
    if sink is None:  # the catalog's foreign key makes this impossible
        raise RequestFailed(ErrorCode.INTERNAL, f"query {row.id} writes a missing sink")
    return assignment(ctx, row.id, run, row.plan, ctx.view.sources_of_query(row.id), sink)


def assignment(
    ctx: PassContext,
    query_id: int,
    run: int,
    plan: str,
    logical_sources: Iterable[str],
    sink: SinkRow,
) -> QueryAssignment:
    """What an agent needs to run ``plan``: the physical sources of the logical sources it
    reads, with their schemas, and its sink."""
    view = ctx.view
    sources: dict[str, list[SourceAssignment]] = {}
    for name in logical_sources:
        logical = view.logical_sources.get(name)
        schema = logical.schema if logical is not None else []
        sources[name] = [
            SourceAssignment(p.id, p.type, p.config, schema) for p in view.physical_sources_of(name)
        ]
    return QueryAssignment(
        query_id,
        run,
        plan,
        sources,
        SinkAssignment(sink.name, sink.type, sink.config, sink.schema),
    )

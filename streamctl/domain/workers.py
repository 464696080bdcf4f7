"""Workers (stage 1): agents registering, heartbeating and leaving, liveness, and declared
workers (``CREATE WORKER``), each change through the agent state machine
(:mod:`streamctl.lifecycle.worker_states`)."""

from __future__ import annotations

from typing import Any

from streamctl.catalog.rows import (
    WorkerRow,
)
from streamctl.domain import queries as queries_stage
from streamctl.domain.context import PassContext, RequestFailed
from streamctl.domain.listing import listing
from streamctl.domain.validate import checked_name as _name
from streamctl.domain.validate import not_found as _not_found
from streamctl.error_codes import ErrorCode
from streamctl.lifecycle.worker_states import (
    AgentState,
    AgentTrigger,
    can_transition,
    transition,
)
from streamctl.protocol import answers
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import AgentAction


def worker_json(row: WorkerRow) -> answers.Worker:
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


def list_workers(ctx: PassContext, request: m.ListWorkers) -> list[answers.Worker] | answers.Page:
    return listing(ctx.view.workers, request.limit, request.after, worker_json, request.kind)


def get_worker(ctx: PassContext, request: m.GetWorker) -> answers.Worker:
    row = ctx.view.workers.get(request.name)
    if row is None:
        raise _not_found("worker", request.name)
    return worker_json(row)


def drain_worker(ctx: PassContext, request: m.DrainWorker) -> answers.Worker:
    row = ctx.view.workers.get(request.name)
    if row is None:
        raise _not_found("worker", request.name)
    if not row.draining:
        row.draining = True
        ctx.stamp(row)
        ctx.record("worker", row.name, "drain", "DrainWorker: no new queries are placed here")
    return worker_json(row)


def declare_worker(ctx: PassContext, name: str, capacity: int) -> answers.Worker:
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

"""``Reoptimize`` in a pass: decide (:mod:`streamctl.planner.reoptimization`) and apply.

* A restart starts a retryable ``FAILED`` query on the agent the decision picked, with a fresh
  restart budget.
* A move takes a ``RUNNING`` query through ``MOVE`` to ``STOPPING`` on its agent
  (:func:`streamctl.lifecycle.query_states.move`) with a stop action; its desired state stays
  ``RUNNING``. When the agent reports it stopped,
  :func:`streamctl.domain.queries.query_status_changed` starts it on another agent from its
  checkpoint (placement again, without the agent it left), so two agents never run it at once.
  Its lag streak is cleared: the next agent's statistics start a new one.
* Every decision is one changelog entry with its reason (``streamctl history`` shows them);
  the answer lists the decisions.
"""

from __future__ import annotations

from typing import Any

from streamctl.catalog.rows import QueryRow
from streamctl.domain import queries as queries_stage
from streamctl.domain.context import PassContext
from streamctl.lifecycle import query_states as lifecycle
from streamctl.lifecycle.query_states import QueryState, fails_on_its_input
from streamctl.planner.placement import Placement
from streamctl.planner.reoptimization import Move, QueryFacts, Restart, decide, lag_of
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import AgentAction, StopAssignment

S = QueryState


def _facts(ctx: PassContext, row: QueryRow) -> QueryFacts:
    intervals, ratio = lag_of(row.statistics)
    return QueryFacts(
        id=row.id,
        state=row.current_state,
        agent=row.worker,
        error=row.error,
        retryable=not fails_on_its_input(row.error or ""),
        lag_intervals=intervals,
        lag_ratio=ratio,
        pinned_to=tuple(queries_stage.pinned_agents(ctx, ctx.view.sources_of_query(row.id))),
    )


def reoptimize(ctx: PassContext, _request: m.Reoptimize) -> Any:
    candidates = [
        row
        for row in ctx.view.queries_in_states((S.FAILED, S.RUNNING))
        if row.desired_state == S.RUNNING
    ]
    decisions = decide(queries_stage.agent_slots(ctx), [_facts(ctx, row) for row in candidates])
    rows = {row.id: row for row in candidates}
    answer: list[dict[str, Any]] = []
    for decision in decisions:
        row = rows[decision.query_id]
        if isinstance(decision, Restart):
            ctx.record("query", row.id, "restart", decision.reason)
            queries_stage.start_on(
                ctx, row, Placement(decision.agent, False), "reoptimization", fresh_budget=True
            )
            answer.append({"query": row.id, "restart": decision.agent, "reason": decision.reason})
        elif isinstance(decision, Move):
            ctx.record("query", row.id, "move", decision.reason)
            _move_off(ctx, row, decision)
            answer.append(
                {
                    "query": row.id,
                    "move": {"from": decision.source, "to": decision.target},
                    "reason": decision.reason,
                }
            )
    return {"decisions": answer}


def _move_off(ctx: PassContext, row: QueryRow, move: Move) -> None:
    step = lifecycle.move(row, ctx.view.now)
    ctx.stamp(row)
    ctx.actions.append(AgentAction(move.source, stop=StopAssignment(row.id, row.run)))
    ctx.record("query", row.id, step.action, f"moving off {move.source}")

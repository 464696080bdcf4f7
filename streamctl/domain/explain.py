"""``EXPLAIN``: the bound plan and placement at once, Spark's plan from an agent shortly after.

Protocol
--------
1. ``ExplainQuery(statement)`` (or ``EXPLAIN SELECT ...`` in ``ExecuteStatement``) is answered
   in its pass, without creating anything a user sees: the bound plan, the output schema, the
   sources and sink, and ``placement`` (the agent the query would start on now, or ``None``).
   When an agent is alive, the pass also records an explanation (``explanation``: its id) and
   asks that agent (the placement, else any alive agent) to build the query without starting
   it (``explain`` :class:`~streamctl.protocol.agent_contract.AgentAction`).
2. The agent answers Spark's plan for the DataFrame it built (``explain_query``), or the error
   that kept it from building one; the workflow feeds the answer back as a
   ``SparkPlanExplained`` event, and a later pass stores it with the explanation.
3. ``GetExplanation(id)`` answers ``ready: false`` until then, and the plan (or the error)
   after. Frontends poll it for a few seconds and show the plan with the rest.

Guarantees: an ``EXPLAIN`` never changes sources, sinks or queries; inline sources and sinks
are checked and explained as they would run (``query0.source1`` ...), without being created;
an explanation is filled in at most once (a late duplicate answer changes nothing).
"""

from __future__ import annotations

from typing import Any

from streamctl.catalog.rows import ExplanationRow, SinkRow
from streamctl.domain import inline
from streamctl.domain import queries as queries_stage
from streamctl.domain.context import PassContext
from streamctl.domain.validate import not_found
from streamctl.lifecycle.worker_states import AgentState
from streamctl.planner import ast
from streamctl.planner.placement import place
from streamctl.protocol import answers
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import AgentAction, ExplainAssignment, SourceAssignment

EXPLAINED_QUERY_ID = 0
"""The query id an explained (never started) query is built under."""


def explain_query(ctx: PassContext, request: m.ExplainQuery) -> Any:
    return explain(ctx, request.statement)


def explain(ctx: PassContext, statement: str | ast.QueryStatement) -> dict[str, Any]:
    parsed = queries_stage.parse(statement)
    bound = queries_stage.bind(ctx, parsed, allow_missing_sink=True)
    objects = inline.prepare(ctx, parsed, bound, EXPLAINED_QUERY_ID)
    runnable = objects.bound
    catalog_sources = bound.logical_sources
    pinned = queries_stage.pinned_agents(ctx, catalog_sources) + [
        source.worker for source in objects.sources if source.worker is not None
    ]
    placement = place(queries_stage.agent_slots(ctx), pinned)
    answer: dict[str, Any] = {
        "plan": bound.plan.explain(),
        "output": [
            {"name": c.name, "type": c.type, "nullable": c.nullable} for c in bound.output_schema
        ],
        "sources": list(runnable.logical_sources),
        "sink": runnable.sink_name,
        "placement": None if placement is None else placement.agent,
        "explanation": None,
    }
    agent = placement.agent if placement is not None else _any_alive_agent(ctx)
    if agent is None:
        return answer
    sink = objects.sink or (
        ctx.view.find_sink(runnable.sink_name) if runnable.sink_name is not None else None
    )
    if sink is None:  # EXPLAIN of a query without INTO: build it into a sink that discards
        sink = SinkRow("explain", answer["output"], "VOID", {}, 0, 0)
    assignment = queries_stage.assignment(
        ctx, EXPLAINED_QUERY_ID, 0, runnable.plan.to_json_text(), catalog_sources, sink
    )
    for source in objects.sources:
        assignment.sources[source.name] = [
            SourceAssignment(0, source.type, source.config, source.schema)
        ]
    view = ctx.view
    explanation = ExplanationRow(
        view.next_id("explanation"), agent, None, None, view.version, view.version
    )
    view.explanations.add(explanation)
    ctx.actions.append(AgentAction(agent, explain=ExplainAssignment(explanation.id, assignment)))
    answer["explanation"] = explanation.id
    return answer


def get_explanation(ctx: PassContext, request: m.GetExplanation) -> answers.ExplanationState:
    row = ctx.view.explanations.get(request.id)
    if row is None:
        raise not_found("explanation", request.id)
    return explanation_json(row)


def explanation_json(row: ExplanationRow) -> answers.ExplanationState:
    return {
        "id": row.id,
        "agent": row.agent,
        "ready": row.spark_plan is not None or row.error is not None,
        "spark_plan": row.spark_plan,
        "error": row.error,
    }


def spark_plan_explained(
    ctx: PassContext, event: m.SparkPlanExplained, _received_at: float
) -> None:
    row = ctx.view.explanations.get(event.explanation_id)
    if row is None or row.spark_plan is not None or row.error is not None:
        return
    row.spark_plan = event.spark_plan
    row.error = event.error if event.spark_plan is None else None
    if row.spark_plan is None and row.error is None:
        row.error = f"agent {event.agent} answered without a plan"
    ctx.stamp(row)


def _any_alive_agent(ctx: PassContext) -> str | None:
    alive = sorted(w.name for w in ctx.view.workers.all() if w.state == AgentState.ALIVE)
    return alive[0] if alive else None

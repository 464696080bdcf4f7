"""The contract between the coordinator and its Spark agents (pure Python, no Spark).

Protocol
--------
* Each agent is a Temporal worker on task queue ``agent.<name>`` (:func:`agent_task_queue`).
  The coordinator workflow runs these activities there, after a pass decided them:

  - ``start_query(QueryAssignment) -> QueryReport``: start the query unless a Spark query with
    that id already runs on the agent (then report it): starting is idempotent by query id.
  - ``stop_query(StopAssignment) -> QueryReport``: stop it gracefully; stopping a query the
    agent does not run reports ``STOPPED``.
  - ``list_queries(str) -> list[QueryReport]``: everything the agent runs (reconciliation).
  - ``validate_plan(QueryAssignment) -> None``: build the query without starting it; raises a
    non-retryable error naming the problem.
  - ``explain_query(ExplainAssignment) -> ExplainReport``: build the query without starting it
    and answer Spark's plan for it (or the error that kept it from building).

* Agents push :class:`~streamctl.protocol.messages.QueryStatusChanged` events when a query's
  Spark status changes (:class:`AgentStatus`) and ``Statistics`` events with its progress.
  Every report carries the agent's name and the assignment's ``run`` (how many times the
  coordinator has started the query), so a late report from an earlier placement is
  recognised and ignored.

Guarantees an agent gives: at most one Spark query per query id; a query's checkpoint is
``<checkpoint root>/query-<id>``, so an agent with the same (shared) checkpoint root resumes a
query another agent ran, from its last committed batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, TypeVar

AGENT_TASK_QUEUE_PREFIX = "agent."


def agent_task_queue(agent_name: str) -> str:
    return f"{AGENT_TASK_QUEUE_PREFIX}{agent_name}"


def query_name(query_id: int) -> str:
    """The Spark query name of a catalog query (unique per SparkSession)."""
    return f"q{query_id}"


class AgentStatus(StrEnum):
    """A query's status as its agent sees it; the coordinator maps it to a lifecycle trigger."""

    RUNNING = "RUNNING"  # Spark query active
    FINISHED = "FINISHED"  # bounded input done, every window emitted
    STOPPED = "STOPPED"  # stopped on request, or not running here
    CRASHED = "CRASHED"  # terminated with an error, or could not start


@dataclass(frozen=True)
class SourceAssignment:
    """One physical source of a logical source the query reads."""

    id: int
    type: str
    config: dict[str, Any]
    schema: list[dict[str, Any]]


@dataclass(frozen=True)
class SinkAssignment:
    name: str
    type: str
    config: dict[str, Any]
    schema: list[dict[str, Any]]


@dataclass(frozen=True)
class QueryAssignment:
    """Everything an agent needs to run a query; the plan is the binder's canonical JSON."""

    query_id: int
    run: int
    plan: str
    sources: dict[str, list[SourceAssignment]]
    sink: SinkAssignment


@dataclass(frozen=True)
class ExplainAssignment:
    """Build ``query`` (never started; its id is 0) and report Spark's plan for it."""

    explanation_id: int
    query: QueryAssignment


@dataclass(frozen=True)
class ExplainReport:
    explanation_id: int
    agent: str
    spark_plan: str | None
    error: str | None = None


@dataclass(frozen=True)
class StopAssignment:
    query_id: int
    run: int


@dataclass(frozen=True)
class QueryReport:
    query_id: int
    run: int
    status: str
    agent: str
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentAction:
    """One thing a pass asks an agent to do: exactly one of ``start``/``stop``/``explain``/
    ``reconcile``."""

    agent: str
    start: QueryAssignment | None = None
    stop: StopAssignment | None = None
    reconcile: bool = False
    explain: ExplainAssignment | None = None

    @property
    def description(self) -> str:
        # The activity's summary in the Temporal Web UI ("start query 12 on agent a1 (run 1)").
        if self.start is not None:
            start = self.start
            return f"start query {start.query_id} on agent {self.agent} (run {start.run})"
        if self.stop is not None:
            return f"stop query {self.stop.query_id} on agent {self.agent} (run {self.stop.run})"
        if self.explain is not None:
            return f"explain statement {self.explain.explanation_id} on agent {self.agent}"
        return f"reconcile agent {self.agent}: list the queries it runs"


def action_from_json(data: dict[str, Any]) -> AgentAction:
    """An :class:`AgentAction` from its ``dataclasses.asdict`` form (stored with its pass)."""
    start = data.get("start")
    stop = data.get("stop")
    explain = data.get("explain")
    return AgentAction(
        agent=data["agent"],
        start=None if start is None else _assignment_from_json(start),
        stop=None if stop is None else StopAssignment(**stop),
        reconcile=bool(data.get("reconcile", False)),
        explain=None
        if explain is None
        else ExplainAssignment(explain["explanation_id"], _assignment_from_json(explain["query"])),
    )


def _assignment_from_json(data: dict[str, Any]) -> QueryAssignment:
    return QueryAssignment(
        query_id=data["query_id"],
        run=data["run"],
        plan=data["plan"],
        sources={
            name: [SourceAssignment(**s) for s in specs] for name, specs in data["sources"].items()
        },
        sink=SinkAssignment(**data["sink"]),
    )


ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class AgentActivity(Generic[ArgT, ResultT]):
    """An activity every agent hosts: the name it is registered under (part of recorded
    histories: never rename one) and what it takes and answers. The workflow runs it typed
    (:func:`streamctl.workflows.agent_calls.execute_on_agent`) without importing the agent's
    Spark code; the agent registers its implementation under :attr:`name`
    (:mod:`streamctl.agent.activities`)."""

    name: str
    result_type: Any


START_QUERY: AgentActivity[QueryAssignment, QueryReport] = AgentActivity("start_query", QueryReport)
STOP_QUERY: AgentActivity[StopAssignment, QueryReport] = AgentActivity("stop_query", QueryReport)
LIST_QUERIES: AgentActivity[str, list[QueryReport]] = AgentActivity(
    "list_queries", list[QueryReport]
)
VALIDATE_PLAN: AgentActivity[QueryAssignment, None] = AgentActivity("validate_plan", None)
EXPLAIN_QUERY: AgentActivity[ExplainAssignment, ExplainReport] = AgentActivity(
    "explain_query", ExplainReport
)

"""The Spark agent's Temporal activities: thin adapters over the agent's Spark queries.

The protocol (who calls what, what comes back, which events an agent pushes) is in
:mod:`streamctl.protocol.agent_contract`; what each action does, and its guarantees, is
:class:`streamctl.agent.runs.SparkQueries`. The activity names are part of the recorded
histories: they never change, and each is registered under its typed constant's name
(:class:`~streamctl.protocol.agent_contract.AgentActivity`), the one the workflow calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from streamctl.agent.runs import SparkQueries
from streamctl.protocol.agent_contract import (
    EXPLAIN_QUERY,
    LIST_QUERIES,
    START_QUERY,
    STOP_QUERY,
    VALIDATE_PLAN,
    ExplainAssignment,
    ExplainReport,
    QueryAssignment,
    QueryReport,
    StopAssignment,
)

__all__ = ["SparkActivities"]


class SparkActivities:
    """The agent's activities (run in threads: every Spark call blocks). They poll their
    cancellation (:class:`~streamctl.agent.attempt.Attempt`) instead of taking an exception
    raised into their thread, which could land in the middle of a Py4J call and break its
    connection."""

    def __init__(self, queries: SparkQueries) -> None:
        self.queries = queries

    @activity.defn(name=START_QUERY.name, no_thread_cancel_exception=True)
    def start_query(self, assignment: QueryAssignment) -> QueryReport:
        return self.queries.start(assignment)

    @activity.defn(name=STOP_QUERY.name, no_thread_cancel_exception=True)
    def stop_query(self, assignment: StopAssignment) -> QueryReport:
        return self.queries.stop(assignment)

    @activity.defn(name=LIST_QUERIES.name, no_thread_cancel_exception=True)
    def list_queries(self, _agent: str) -> list[QueryReport]:
        return self.queries.list()

    @activity.defn(name=VALIDATE_PLAN.name, no_thread_cancel_exception=True)
    def validate_plan(self, assignment: QueryAssignment) -> None:
        self.queries.validate(assignment)

    @activity.defn(name=EXPLAIN_QUERY.name, no_thread_cancel_exception=True)
    def explain_query(self, request: ExplainAssignment) -> ExplainReport:
        return self.queries.explain(request)

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.start_query,
            self.stop_query,
            self.list_queries,
            self.validate_plan,
            self.explain_query,
        ]

"""Running one agent action from the coordinator workflow, and turning its outcome into the
events a later pass applies.

Protocol: the pass decides actions (:class:`~streamctl.protocol.agent_contract.AgentAction`); the
workflow runs each as an activity on its agent's task queue through the typed
:class:`~streamctl.protocol.agent_contract.AgentActivity` constants, without blocking its loop. The
outcome is a ``QueryStatusChanged`` (like the agents' own reports) or ``SparkPlanExplained``
event:

* a start answers the agent's report; a failed start reports ``CRASHED`` and is followed by a
  stop of that run, in case it landed after its activity gave up;
* a stop answers the agent's report; a stop that failed, or that no agent picked up, is run
  again every :data:`STOP_RETRY_DELAY`, and after :data:`STOP_ROUNDS` the query is left
  ``STOPPING`` (no event): the agent's periodic ``RUNNING`` report of that run has a later
  pass send the stop again (``STOP_AGAIN`` in :mod:`streamctl.lifecycle.query_states`), and
  liveness stops it if the agent is gone;
* an explain answers Spark's plan or the error; a reconcile lists what the agent runs.

Workflow code: deterministic, and the ``workflow.patched`` ids (:mod:`.patches`) keep older
histories replaying as they ran.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from streamctl.protocol import refusals
    from streamctl.protocol.agent_contract import (
        EXPLAIN_QUERY,
        LIST_QUERIES,
        START_QUERY,
        STOP_QUERY,
        AgentAction,
        AgentActivity,
        QueryReport,
        StopAssignment,
        agent_task_queue,
    )
    from streamctl.protocol.messages import Event, QueryStatusChanged, SparkPlanExplained
    from streamctl.workflows import patches

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")

STOP_RETRY_DELAY = timedelta(seconds=10)
STOP_ROUNDS = 6

ACTION_TIMEOUT = timedelta(seconds=120)
"""Starting a query on Spark takes seconds (the first one on an agent ~3 s); stopping less."""
ACTION_PICKUP_TIMEOUT = timedelta(seconds=20)
"""An agent that does not pick an action up in this time is probably dead; the action fails and
the query recovers elsewhere (liveness moves it too)."""
ACTION_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=[refusals.QUERY_REJECTED],
)
EXPLAIN_RETRY = RetryPolicy(maximum_attempts=1)
"""An explain is tried once: the user waits for it, and a statement whose plan took Spark down
took it down again on every retry, long after the user had been told it timed out."""


@dataclass(frozen=True)
class AgentCallOptions:
    """How the workflow runs one action on an agent."""

    task_queue: str
    schedule_to_start_timeout: timedelta
    start_to_close_timeout: timedelta
    retry_policy: RetryPolicy
    summary: str | None = None


async def execute_on_agent(
    activity: AgentActivity[ArgT, ResultT], argument: ArgT, options: AgentCallOptions
) -> ResultT:
    """Run one of the agents' activities (:mod:`streamctl.protocol.agent_contract`), typed."""
    result: ResultT = await workflow.execute_activity(
        activity.name,
        argument,
        result_type=activity.result_type,
        task_queue=options.task_queue,
        schedule_to_start_timeout=options.schedule_to_start_timeout,
        start_to_close_timeout=options.start_to_close_timeout,
        retry_policy=options.retry_policy,
        summary=options.summary,
    )
    return result


async def run_action(
    action: AgentAction, start_action: Callable[[AgentAction], None]
) -> list[Event] | None:
    """Run one agent action: the events its outcome brings (``QueryStatusChanged``, like the
    agents' own reports, or ``SparkPlanExplained``) for a later pass, or ``None`` for a stop
    that kept failing. ``start_action`` runs a follow-up action beside this one.

    A stop that failed, or that no agent picked up, is run again after
    :data:`STOP_RETRY_DELAY` (up to :data:`STOP_ROUNDS` times): a stop is reported ``STOPPED``
    only on the agent's word, so the catalog never shows a query stopped while its run may go
    on; a query whose agent is gone is ``STOPPED`` when liveness declares the agent DEAD. A
    failed start is followed by a stop of that run, in case the start did land."""
    outcomes = await _execute_action(action, start_action)
    rounds = 1
    while action.stop is not None and outcomes is _STOP_AGAIN and rounds < STOP_ROUNDS:
        await workflow.sleep(STOP_RETRY_DELAY)
        outcomes = await _execute_action(action, start_action)
        rounds += 1
    if outcomes is _STOP_AGAIN:
        # Still not stopped for sure: the query stays STOPPING (true) rather than STOPPED
        # (maybe false). Liveness settles it if the agent is gone; if the agent still runs
        # it, its RUNNING reports have a later pass send the stop again.
        workflow.logger.error("%s failed %d times; leaving it STOPPING", action.description, rounds)
        return None
    return outcomes


async def _execute_action(
    action: AgentAction, start_action: Callable[[AgentAction], None]
) -> list[Event]:
    queue = agent_task_queue(action.agent)
    options = AgentCallOptions(
        task_queue=queue,
        start_to_close_timeout=ACTION_TIMEOUT,
        schedule_to_start_timeout=ACTION_PICKUP_TIMEOUT,
        retry_policy=ACTION_RETRY,
        summary=action.description,
    )
    try:
        if action.start is not None:
            started = await execute_on_agent(START_QUERY, action.start, options)
            return [_status_event(started)]
        if action.stop is not None:
            stopped = await execute_on_agent(STOP_QUERY, action.stop, options)
            return [_status_event(stopped)]
        if action.explain is not None:
            options = dataclasses.replace(options, retry_policy=EXPLAIN_RETRY)
            explained = await execute_on_agent(EXPLAIN_QUERY, action.explain, options)
            return [
                SparkPlanExplained(
                    explained.explanation_id,
                    explained.agent,
                    explained.spark_plan,
                    explained.error,
                )
            ]
        listed = await execute_on_agent(LIST_QUERIES, action.agent, options)
        return [_status_event(report) for report in listed]
    except ActivityError as error:
        reason = str(error.cause or error)
        if action.start is not None:
            start = action.start
            failed = f"start on {action.agent} failed: {reason}"
            if workflow.patched(patches.STOP_AFTER_FAILED_START):
                # The start may have landed after its activity gave up (its answer lost):
                # stop that run; the agent ignores a stop of a run it does not have.
                start_action(
                    AgentAction(action.agent, stop=StopAssignment(start.query_id, start.run))
                )
            return [
                QueryStatusChanged(
                    start.query_id, "CRASHED", failed, agent=action.agent, run=start.run
                )
            ]
        if (
            action.stop is not None
            and not _never_picked_up(error)
            and workflow.patched(patches.STOP_UNTIL_STOPPED)
        ):
            return _STOP_AGAIN
        if (
            action.stop is not None
            and _never_picked_up(error)
            and workflow.patched(patches.UNCONFIRMED_STOP_STAYS_STOPPING)
        ):
            # No agent took the stop: its agent may be gone, or alive with every action slot
            # busy (it polls for no more then). Reported STOPPED, the query could start
            # elsewhere while its run goes on here; it stays STOPPING until the agent answers
            # or liveness declares it DEAD (STOPPING -> STOPPED: nothing runs any more).
            return _STOP_AGAIN
        if action.stop is not None:
            # Nothing more to do here: if the agent still runs it, reconciliation stops it
            # when the agent registers again.
            stop = action.stop
            failed = f"stop on {action.agent} failed: {reason}"
            return [
                QueryStatusChanged(
                    stop.query_id, "STOPPED", failed, agent=action.agent, run=stop.run
                )
            ]
        if action.explain is not None:
            failed = f"explain on {action.agent} failed: {reason}"
            return [SparkPlanExplained(action.explain.explanation_id, action.agent, None, failed)]
        workflow.logger.warning("reconciling %s failed: %s", action.agent, reason)
        return []


_STOP_AGAIN: list[Event] = []
"""The outcome of a stop that failed while its agent may still run the query."""


def _never_picked_up(error: ActivityError) -> bool:
    """Whether no agent took the action (its task queue has no poller: the agent is gone)."""
    cause = error.cause
    return isinstance(cause, ActivityTimeout) and cause.type == TimeoutType.SCHEDULE_TO_START


def _status_event(report: QueryReport) -> QueryStatusChanged:
    return QueryStatusChanged(
        report.query_id, report.status, report.error, agent=report.agent, run=report.run
    )

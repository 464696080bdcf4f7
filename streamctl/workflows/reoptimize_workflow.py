"""The reoptimization workflow: what a Temporal Schedule starts to make the coordinator
reoptimize (``streamctl schedule reoptimize --every 5m``).

Protocol
--------
* The schedule (:mod:`streamctl.cli.schedules`) starts one run of this workflow per tick on
  the coordinator task queue, with the coordinator's workflow id as input.
* The run executes the ``request_reoptimize`` activity
  (:mod:`streamctl.activities.coordinator_requests`), which sends one ``Reoptimize`` request
  to the coordinator and returns its answer: the decisions and their reasons. The pass that
  answers it records every decision in the changelog (``streamctl history``).

Guarantees
----------
* Exactly once per run: the request id is derived from this run's id, so an activity retry
  (the coordinator continuing as new, a worker restart) gets the stored answer instead of a
  second reoptimization.
* A run never overlaps another: the schedule's overlap policy skips a tick while one runs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from streamctl.activities.coordinator_requests import request_reoptimize
    from streamctl.protocol import refusals
    from streamctl.protocol.coordinator_config import REOPTIMIZATION_WORKFLOW, ReoptimizeTarget


@workflow.defn(name=REOPTIMIZATION_WORKFLOW)
class ReoptimizationWorkflow:
    @workflow.run
    async def run(self, target: ReoptimizeTarget) -> Any:
        info = workflow.info()
        request = ReoptimizeTarget(
            target.coordinator_workflow_id, f"reoptimize-{info.workflow_id}-{info.run_id}"
        )
        return await workflow.execute_activity(
            request_reoptimize,
            request,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(
                maximum_interval=timedelta(seconds=10),
                maximum_attempts=10,
                non_retryable_error_types=[refusals.REQUEST_REFUSED],
            ),
            summary=f"ask {target.coordinator_workflow_id} to reoptimize",
        )

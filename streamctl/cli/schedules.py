"""Temporal Schedules that drive the coordinator (``streamctl schedule ...``).

``reoptimize`` creates (or updates) the schedule ``reoptimize``: every interval it starts a
:class:`~streamctl.workflows.reoptimize_workflow.ReoptimizationWorkflow` on the coordinator task
queue, which sends ``Reoptimize`` to the coordinator. A tick that finds the previous run still
going is skipped (overlap policy SKIP), and a schedule paused or deleted in the Temporal UI
stays so. ``trigger`` runs it once now; ``delete`` removes it.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)

from streamctl.protocol.coordinator_config import (
    COORDINATOR_TASK_QUEUE,
    COORDINATOR_WORKFLOW_ID,
    REOPTIMIZATION_WORKFLOW,
    ReoptimizeTarget,
)

REOPTIMIZE_SCHEDULE_ID = "reoptimize"
MIN_INTERVAL = timedelta(seconds=1)

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_interval(text: str) -> timedelta:
    """``90s``, ``5m``, ``1h30m``, ``2d``: a schedule's interval (at least one second)."""
    compact = text.strip().lower().replace(" ", "")
    parts = _DURATION.findall(compact)
    if not compact or "".join(number + unit for number, unit in parts) != compact:
        raise ValueError(
            f"invalid interval {text!r}: use a number and a unit (ms, s, m, h, d), e.g. 5m or 1h30m"
        )
    interval = timedelta(seconds=sum(float(number) * _UNITS[unit] for number, unit in parts))
    if interval < MIN_INTERVAL:
        raise ValueError(f"invalid interval {text!r}: a schedule runs at most once a second")
    return interval


def _reoptimize_schedule(every: timedelta, coordinator_id: str, task_queue: str) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            REOPTIMIZATION_WORKFLOW,
            ReoptimizeTarget(coordinator_id),
            id=f"{REOPTIMIZE_SCHEDULE_ID}-{coordinator_id}",
            task_queue=task_queue,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def schedule_reoptimize(
    client: Client,
    every: timedelta,
    *,
    coordinator_id: str = COORDINATOR_WORKFLOW_ID,
    task_queue: str = COORDINATOR_TASK_QUEUE,
    schedule_id: str = REOPTIMIZE_SCHEDULE_ID,
) -> dict[str, Any]:
    """Create the reoptimization schedule, or give an existing one the new interval."""
    schedule = _reoptimize_schedule(every, coordinator_id, task_queue)
    try:
        await client.create_schedule(schedule_id, schedule)
        created = True
    except ScheduleAlreadyRunningError:

        def replace(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        await client.get_schedule_handle(schedule_id).update(replace)
        created = False
    return {
        "schedule": schedule_id,
        "created": created,
        "every_s": every.total_seconds(),
        "coordinator": coordinator_id,
    }


async def trigger_schedule(client: Client, schedule_id: str) -> None:
    await client.get_schedule_handle(schedule_id).trigger()


async def delete_schedule(client: Client, schedule_id: str) -> None:
    await client.get_schedule_handle(schedule_id).delete()

"""The activity attempt a Spark action runs in: its deadline and its cancellation.

:class:`~streamctl.agent.runs.SparkQueries` takes :meth:`Attempt.current` at the start of an
action: inside a Temporal activity (:mod:`streamctl.agent.activities`) it gives up
:data:`LATE_MARGIN_S` before the attempt's timeout or when the attempt is cancelled, and
heartbeats while it waits; outside one (tests, tools) it never gives up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio import activity

__all__ = ["LATE_MARGIN_S", "Attempt"]

LATE_MARGIN_S = 2.0
"""A start attempt counts as given up this long before its start-to-close timeout, so that what
it started is stopped before the coordinator can act on the timeout."""


@dataclass(frozen=True)
class Attempt:
    """The activity attempt an action runs in: its deadline (monotonic) and cancellation."""

    deadline: float | None = None
    in_activity: bool = False
    workflow_id: str | None = None  # of the workflow that runs the activity

    @classmethod
    def current(cls) -> Attempt:
        if not activity.in_activity():
            return cls()
        info = activity.info()
        workflow_id = info.workflow_id
        timeouts = [
            (start + timeout) - datetime.now(UTC)
            for start, timeout in (
                (info.started_time, info.start_to_close_timeout),
                (info.scheduled_time, info.schedule_to_close_timeout),
            )
            if timeout
        ]
        if not timeouts:
            return cls(None, True, workflow_id)
        left = min(timeouts).total_seconds() - LATE_MARGIN_S
        return cls(time.monotonic() + left, True, workflow_id)

    def remaining(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def gave_up(self) -> bool:
        """Whether the coordinator no longer waits for this attempt."""
        return self.remaining() <= 0 or (self.in_activity and activity.is_cancelled())

    def heartbeat(self) -> None:
        if self.in_activity:
            activity.heartbeat()

"""Spark's streaming query callbacks turned into the agent's events (:class:`QueryListener`).

Spark calls the listener on a Py4J thread; it hands progress and terminations to
:class:`~streamctl.agent.runs.SparkQueries` (``on_progress``, ``on_terminated``), which
reports them to the coordinator. A listener is bound to the JVM it was added to: the agent
adds a new one to each session it builds.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from pyspark.sql.streaming.listener import StreamingQueryListener

__all__ = ["QueryListener", "RunReports"]

log = logging.getLogger(__name__)


class RunReports(Protocol):
    """Where the listener hands what Spark tells it (the agent's
    :class:`~streamctl.agent.runs.SparkQueries`)."""

    def on_progress(self, name: str | None, run_id: str, values: dict[str, float]) -> None: ...

    def on_terminated(self, run_id: str, error: str | None) -> None: ...


class QueryListener(StreamingQueryListener):
    """Spark's callbacks (on a Py4J thread) turned into the agent's events."""

    def __init__(self, queries: RunReports) -> None:
        self._queries = queries

    def onQueryStarted(self, event: Any) -> None:
        pass  # the start action's answer reports RUNNING

    def onQueryProgress(self, event: Any) -> None:
        try:
            progress = event.progress
            values = {
                "input_rows_per_s": float(progress.inputRowsPerSecond or 0.0),
                "processed_rows_per_s": float(progress.processedRowsPerSecond or 0.0),
                "batch_duration_ms": float(progress.batchDuration or 0),
                "input_rows": float(progress.numInputRows or 0),
                "state_rows": float(sum(op.numRowsTotal for op in progress.stateOperators)),
                "batch_id": float(progress.batchId),
            }
            self._queries.on_progress(progress.name, str(progress.runId), values)
        except Exception:  # a listener must never break Spark's listener bus
            log.exception("could not report streaming progress")

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        try:
            self._queries.on_terminated(str(event.runId), event.exception)
        except Exception:
            log.exception("could not report a terminated streaming query")

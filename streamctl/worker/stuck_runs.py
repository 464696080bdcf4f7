"""The coordinator worker process ends when the Temporal SDK cannot evict a workflow run.

Protocol. The SDK runs each workflow activation in a thread and fails the task of one that
runs past its deadlock detection (2 s); it then evicts the run from its cache. When the
eviction itself cannot finish (the interrupted activation left tasks behind: "Eviction
processed, but N tasks remain", or the eviction times out), the SDK retries it every 2 s,
forever, and the run's slot stays taken: this worker never runs that workflow again. With one
coordinator worker the coordinator then stops for good; every request times out and no agent
is declared dead. A loaded 2-core machine is enough: an activation that encodes a large pass
can take over 2 s (see docs/decisions.md).

The SDK reports that only in its log, at ERROR, from ``temporalio.worker._workflow``.
:class:`StuckRunWatchdog` is a logging handler on that logger: on such a record it logs why
and ends the process with :data:`STUCK_EXIT_CODE` after :data:`STUCK_EXIT_GRACE` seconds (at
once would lose the log line). A graceful shutdown is not tried: the SDK's shutdown waits for
the stuck eviction. Whatever runs the worker starts a fresh one (``streamctl up``'s
supervisor, the benchmarks' stack, systemd or Kubernetes in a deployment), which replays the
run from its history, as after ``kill -9`` of the worker: a pass in flight is retried under
its claim on its pass number, so the catalog stays single-writer and every message is applied
once (the fault tests kill the worker that way).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

SDK_WORKFLOW_LOGGER = "temporalio.worker._workflow"
"""The SDK module that reports a run it cannot evict."""
STUCK_MESSAGE = "running eviction job"
"""In both of the SDK's reports: "Failed running eviction job ..." and "Timed out running
eviction job ..."."""
STUCK_EXIT_CODE = 75
"""``EX_TEMPFAIL``: try again (a fresh process)."""
STUCK_EXIT_GRACE = 0.5


def _exit_stuck() -> None:
    logging.shutdown()  # flush the log line that says why
    os._exit(STUCK_EXIT_CODE)


class StuckRunWatchdog(logging.Handler):
    """Hears the SDK's report of a run it cannot evict and calls ``on_stuck`` (by default the
    process exits) once, :data:`STUCK_EXIT_GRACE` seconds later, on its own thread."""

    def __init__(
        self, on_stuck: Callable[[], None] = _exit_stuck, grace: float = STUCK_EXIT_GRACE
    ) -> None:
        super().__init__(level=logging.ERROR)
        self.on_stuck = on_stuck
        self.grace = grace
        self.heard = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if STUCK_MESSAGE not in str(record.msg) or self.heard.is_set():
            return
        self.heard.set()
        log.critical(
            "the Temporal SDK cannot evict workflow run %s from its cache; its slot would stay "
            "taken for good, so this worker process ends (exit code %d) and a fresh one "
            "replays the run",
            record.args[0] if isinstance(record.args, tuple) and record.args else "?",
            STUCK_EXIT_CODE,
        )
        timer = threading.Timer(self.grace, self.on_stuck)
        timer.daemon = True
        timer.start()

    @contextlib.contextmanager
    def listening(self) -> Iterator[StuckRunWatchdog]:
        """Attached to the SDK's workflow logger while the block runs."""
        sdk = logging.getLogger(SDK_WORKFLOW_LOGGER)
        sdk.addHandler(self)
        try:
            yield self
        finally:
            sdk.removeHandler(self)

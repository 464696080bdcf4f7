"""A coordinator worker process ends when the SDK cannot evict a run
(:mod:`streamctl.worker.stuck_runs`), so that a fresh one takes over."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from conftest import DevServer

from streamctl.worker.stuck_runs import (
    SDK_WORKFLOW_LOGGER,
    STUCK_EXIT_CODE,
    StuckRunWatchdog,
)

HELPER = Path(__file__).with_name("stuck_run_worker.py")


def test_a_worker_whose_run_cannot_be_evicted_exits_for_a_fresh_one(temporal: DevServer) -> None:
    """The real SDK, a run it cannot evict: the process exits with STUCK_EXIT_CODE (without
    the watchdog it would keep the run's slot and idle for 120 s, then exit 0)."""
    address = temporal.address
    worker = subprocess.Popen(
        [sys.executable, str(HELPER), address, f"stuck-{uuid.uuid4().hex[:8]}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = worker.communicate(timeout=90)
    finally:
        worker.kill()
    assert worker.returncode == STUCK_EXIT_CODE, output[-3000:]
    assert "cannot evict workflow run" in output


@pytest.mark.quick
def test_the_watchdog_acts_once_and_only_on_the_eviction_reports() -> None:
    """Only the SDK's reports at ERROR of an eviction it cannot finish; once; detached after."""
    calls: list[str] = []
    done = threading.Event()

    def on_stuck() -> None:
        calls.append("stuck")
        done.set()

    sdk = logging.getLogger(SDK_WORKFLOW_LOGGER)
    with StuckRunWatchdog(on_stuck, grace=0.01).listening():
        sdk.error("Failed activation on workflow %s", "x")
        sdk.warning("Timed out running eviction job for run ID %s", "run-0")  # below ERROR
        assert not done.wait(0.2)
        sdk.error("Failed running eviction job for run ID %s, continually retrying", "run-1")
        sdk.error("Timed out running eviction job for run ID %s", "run-2")
        assert done.wait(5)
        sdk.error("Failed running eviction job for run ID %s", "run-3")
    assert not any(isinstance(handler, StuckRunWatchdog) for handler in sdk.handlers)
    assert calls == ["stuck"]

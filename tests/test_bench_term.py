"""A TERM sent to ``streamctl bench ...`` stops the private stack with it: the benchmark's
Temporal dev server and coordinator worker (in sessions of their own, so no signal to the
benchmark's process group reaches them) are gone once the benchmark has exited, and so is the
stack's directory. Python's default for a TERM ends the process without unwinding; the bench
commands turn it into an exit that runs the stack's ``finally``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from streamctl.bench.process_cpu import running
from streamctl.worker.supervisor import STACK_FILE

DEADLINE_S = 120.0


def _stack_file(tmp: Path) -> Path | None:
    found = sorted(tmp.glob(f"streamctl-bench-*/{STACK_FILE}"))
    return found[0] if found else None


def test_a_term_stops_the_benchmark_and_its_private_stack(tmp_path: Path) -> None:
    log = tmp_path / "bench.log"
    with log.open("wb") as output:
        benchmark = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamctl.cli",
                "bench",
                "latency",
                "--rounds",
                "1000000",
            ],
            env={**os.environ, "TMPDIR": str(tmp_path)},
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    pids: list[int] = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        while (stack_file := _stack_file(tmp_path)) is None:
            assert benchmark.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "the benchmark's stack did not start"
            time.sleep(0.2)
        stack = json.loads(stack_file.read_text())
        pids = [stack["temporal_pid"], *stack["coordinator_pids"]]
        assert all(running(pid) for pid in pids)

        benchmark.send_signal(signal.SIGTERM)
        status = benchmark.wait(timeout=DEADLINE_S)
        still_running = [pid for pid in pids if running(pid)]
    finally:
        # Whatever the outcome, nothing of this run is left to the rest of the suite.
        if benchmark.poll() is None:
            benchmark.kill()
            benchmark.wait()
        for pid in pids:
            if running(pid):
                os.kill(pid, signal.SIGKILL)

    assert status == 128 + signal.SIGTERM, log.read_text()[-2000:]
    assert still_running == []
    assert not stack_file.parent.exists()

"""``streamctl up --detach`` / ``status`` / ``down`` as a user runs them: the embedded stack
with one Spark agent comes up, the agent registers, and ``down`` leaves no process behind."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamctl.client.client import CoordinatorClient
from streamctl.worker.supervisor import pid_alive, read_stack
from streamctl.worker.temporal_server import free_port
from streamctl.workflows import messages as m

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def streamctl(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamctl.client.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_up_with_an_agent_then_down_leaves_nothing_running(tmp_path: Path):
    state = tmp_path / "state"
    port = free_port()
    up = streamctl(
        "up",
        "--detach",
        "--state-dir",
        str(state),
        "--port",
        str(port),
        "--ui-port",
        str(free_port()),
        "--agents",
        "1",
    )
    assert up.returncode == 0, up.stdout + up.stderr
    info = read_stack(state)
    assert info is not None and len(info.agent_pids) == 1
    pids = [info.supervisor_pid, info.temporal_pid, *info.coordinator_pids, *info.agent_pids]
    try:
        status = streamctl("status", "--json", "--address", info.address)
        assert status.returncode == 0, status.stdout + status.stderr
        assert json.loads(status.stdout)["passes_run"] >= 0

        with CoordinatorClient(info.address) as client:
            deadline = time.monotonic() + 120
            workers: list[dict[str, object]] = []
            while time.monotonic() < deadline:
                workers = client.ask_blocking(m.ListWorkers())
                if workers and workers[0]["state"] == "ALIVE":
                    break
                time.sleep(0.5)
            assert [(w["name"], w["state"], w["task_queue"]) for w in workers] == [
                ("local_1", "ALIVE", "agent.local_1")
            ]
    finally:
        down = streamctl("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stdout + down.stderr
    deadline = time.monotonic() + 30
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in pids if pid_alive(pid)]

"""``streamctl demo``, the README's first command, end to end: it runs a windowed aggregation
query on a real stack (Temporal dev server, coordinator, Spark agent), prints its first result
rows, and leaves the stack as it found it (a running one running, one it started stopped).
``up --detach``'s wait for its agents (:func:`~streamctl.worker.supervisor.wait_until_up`)
is checked on the same stack.

The expected rows are computed here from the generator's definition (``SEQUENCE`` fields as
NebulaStream defines them) and the query's meaning, not from what the demo prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from streamctl.cli.demo_query import DemoNames, demo_statements
from streamctl.client.client import CoordinatorClient
from streamctl.local_ports import free_port, port_open
from streamctl.protocol import messages as m
from streamctl.worker.supervisor import pid_alive, read_stack, wait_until_up

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")


def streamctl(*args: str, state: Path) -> subprocess.Popen[str]:
    """``streamctl <args>`` as a user runs it, outside the repository, with ``state`` as the
    state directory."""
    return subprocess.Popen(
        [sys.executable, "-m", "streamctl.cli", *args],
        cwd=tempfile.gettempdir(),
        env={**os.environ, "STREAMCTL_STATE_DIR": str(state)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str], timeout: float = 400) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"streamctl did not finish within {timeout:.0f} s:\n{out}\n{err}")
    return process.returncode, out, err


def expected_rows() -> list[tuple[int, ...]]:
    """The first three windows of the demo's query, from the generator's definition.

    ``SEQUENCE <type> <start> <end> <step>`` writes ``start``, then adds ``step`` while below
    ``end`` (so row ``k`` holds ``min(start + k * step, end)``); the query groups ``id % 3``
    per 1-second tumbling window of ``ts`` (milliseconds) and counts and sums the ids.
    """
    statement = next(s for s in demo_statements(DemoNames.fresh()) if "GENERATOR_SCHEMA" in s)
    schema = re.search(r"'(SEQUENCE[^']*)' AS `SOURCE`.GENERATOR_SCHEMA", statement)
    assert schema is not None, statement
    fields = [field.split() for field in schema.group(1).split(",")]
    assert [field[:2] for field in fields] == [["SEQUENCE", "UINT64"]] * 2, fields

    def value(field: list[str], k: int) -> int:
        start, end, step = (int(part) for part in field[2:])
        return min(start + k * step, end)

    rows = [(value(fields[0], k), value(fields[1], k)) for k in range(1000)]  # (id, ts)
    expected = []
    for window in range(3):
        start, end = 1000 * window, 1000 * (window + 1)
        for sensor in range(3):
            ids = [i for i, ts in rows if start <= ts < end and i % 3 == sensor]
            expected.append((start, end, sensor, len(ids), sum(ids)))
    return expected


def printed_rows(out: str) -> list[tuple[int, ...]]:
    return [
        tuple(int(g) for g in found.groups()) for found in map(ROW.match, out.splitlines()) if found
    ]


def test_expected_rows_follow_the_generator():
    """The derivation above, spelled out for the first window: ids 0..9 (ts 0..900)."""
    assert expected_rows()[:3] == [(0, 1000, 0, 4, 18), (0, 1000, 1, 3, 12), (0, 1000, 2, 3, 15)]


def demo_leftovers(address: str, state: Path) -> list[str]:
    """What of a demo is still in the stack: catalog objects and sink directories."""
    with CoordinatorClient(address) as client:
        names = [q["statement"] for q in client.ask_blocking(m.ListQueries())]
        names += [s["name"] for s in client.ask_blocking(m.ListSinks())]
        names += [s["name"] for s in client.ask_blocking(m.ListLogicalSources())]
    files = state / "files"
    names += [p.name for p in files.iterdir()] if files.is_dir() else []
    return [name for name in names if "demo" in name.lower()]


def test_demo_on_a_running_stack_prints_its_rows_and_leaves_the_stack_running(tmp_path: Path):
    state = tmp_path / "state"
    up = streamctl(
        "up", "--detach", "--state-dir", str(state), "--port", str(free_port()),
        "--ui-port", str(free_port()), "--agents", "1", state=state,
    )  # fmt: skip
    code, out, err = finish(up, timeout=240)
    assert code == 0, out + err
    info = read_stack(state)
    assert info is not None
    pids = [info.supervisor_pid, info.temporal_pid, *info.coordinator_pids, *info.agent_pids]
    try:
        # up --detach returned once its agent was ALIVE ...
        with CoordinatorClient(info.address) as client:
            workers = client.ask_blocking(m.ListWorkers())
        assert [(w["name"], w["state"]) for w in workers] == [("local_1", "ALIVE")]
        # ... and its wait names an agent that is not.
        bystander = subprocess.Popen(["sleep", "60"])
        try:
            assert wait_until_up(bystander, state, info.address, 1, since=0, timeout=10) is None
            problem = wait_until_up(bystander, state, info.address, 2, since=0, timeout=2)
        finally:
            bystander.kill()
            bystander.wait()
        assert problem is not None and "agent local_2 is not ALIVE" in problem, problem
        assert "never registered" in problem and "local_1" not in problem, problem

        # Two demos at once on one stack: their names do not collide.
        demos = [streamctl("demo", state=state) for _ in range(2)]
        results = [finish(demo) for demo in demos]
        for code, out, err in results:
            assert code == 0, out + err
            assert printed_rows(out) == expected_rows(), out
            assert "RUNNING" in out and "streamctl query show" in out, out
            assert f"{info.ui_url}/namespaces/default/workflows/coordinator" in out, out

        assert read_stack(state) == info
        assert all(pid_alive(pid) for pid in pids)
        assert demo_leftovers(info.address, state) == []
    finally:
        down = streamctl("down", "--state-dir", str(state), state=state)
        code, out, err = finish(down, timeout=120)
    assert code == 0, out + err


def test_demo_without_a_stack_starts_one_and_stops_it(tmp_path: Path):
    """The README's first command: no stack yet, so the demo starts one on the default ports
    and stops it when done."""
    if port_open(7233) or port_open(8233):
        pytest.skip("the default ports 7233/8233 are taken (a stack of someone else's is up)")
    state = tmp_path / "state"
    code, out, err = finish(streamctl("demo", "--state-dir", str(state), state=state))
    assert code == 0, out + err
    assert printed_rows(out) == expected_rows(), out
    assert read_stack(state) is None
    deadline = time.monotonic() + 30
    while _processes_using(state) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_using(state) == []
    assert not port_open(7233)


def _processes_using(state: Path) -> list[int]:
    """Processes whose command line or environment names ``state``: the stack's."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            text = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except OSError:
            continue
        if str(state).encode() in text:
            found.append(int(entry.name))
    return found

"""``bench requests``' CPU readings (:mod:`streamctl.bench.process_cpu`) count a process's
descendants while they live, whichever thread started them, and after they were waited for,
as the coordinator worker's pass processes are; a command name that is no UTF-8 is read too.
Between two readings, each process counts what it used since the first (all of it when it
started in between), and one that ended counts nothing, without hiding the others. The soak's
and scale bench's resident memory counts live descendants the same way."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from streamctl.bench.process_cpu import tree_cpu_seconds, tree_rss_bytes
from streamctl.bench.requests import cpu_per_request, cpu_used

BURN = """
import sys, time
while time.process_time() < 0.3:
    pass
print(time.process_time(), flush=True)
sys.stdin.read()
"""

TICKS = 4 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.04
"""The readings' granularity: utime and stime are each rounded down, in two processes."""

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")


def _burning(executable: str = sys.executable) -> tuple[subprocess.Popen[str], float]:
    """A child that used 0.3 s of CPU and waits for its stdin to close, and that CPU as it
    counted it itself."""
    child = subprocess.Popen(
        [executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    return child, float(child.stdout.readline())


def _descendants_cpu() -> float:
    """This process's reading less its own CPU: that of its children, live or waited for."""
    return tree_cpu_seconds(os.getpid()) - time.process_time()


def _end(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.close()
    child.wait()


@linux
def test_a_child_counts_while_it_lives_and_after_it_was_waited_for() -> None:
    earlier = _descendants_cpu()  # earlier tests' children, waited for
    child, burnt = _burning()
    alive = _descendants_cpu()
    assert alive >= earlier + burnt - TICKS
    _end(child)  # its CPU moves to this process's count of waited-for children
    assert _descendants_cpu() >= alive - TICKS
    assert tree_cpu_seconds(child.pid) == 0.0  # gone: nothing to read


@linux
def test_a_child_another_thread_started_counts() -> None:
    # The thread lives on while the reading is taken: a thread that ends hands its children
    # to the main thread.
    started: list[tuple[subprocess.Popen[str], float]] = []
    ready, read = threading.Event(), threading.Event()

    def start_child() -> None:
        started.append(_burning())
        ready.set()
        read.wait()

    earlier = _descendants_cpu()
    thread = threading.Thread(target=start_child)
    thread.start()
    ready.wait()
    [(child, burnt)] = started
    try:
        assert _descendants_cpu() >= earlier + burnt - TICKS
    finally:
        read.set()
        thread.join()
        _end(child)


@linux
def test_a_command_name_that_is_no_utf8_is_read(tmp_path: Path) -> None:
    # The kernel keeps 15 bytes of the name: the eighth "é" is cut in half.
    executable = tmp_path / ("é" * 9)
    executable.symlink_to(sys.executable)
    child, burnt = _burning(str(executable))
    try:
        assert tree_cpu_seconds(child.pid) >= burnt - TICKS
    finally:
        _end(child)


@pytest.mark.quick
def test_each_process_counts_what_it_used_since_the_first_reading() -> None:
    before = {"client": {1: 1.0}, "postgres": {10: 100.0, 11: 5.0}}
    # 10 ended (its CPU is gone with it), 11 used 2 s more, 12 started and used 1 s.
    after = {"client": {1: 3.0}, "postgres": {11: 7.0, 12: 1.0}}
    used = cpu_used(before, after)
    assert used == {"client": 2.0, "postgres": 3.0}
    assert cpu_per_request(used, 1000) == {"client": 2000.0, "postgres": 3000.0, "total": 5000.0}


@pytest.mark.quick
def test_a_part_without_a_first_reading_is_left_out() -> None:
    assert cpu_used({"client": {1: 1.0}}, {"client": {1: 2.0}, "postgres": {7: 9.0}}) == {
        "client": 1.0
    }


HOLD = """
import sys
held = bytearray(b"x" * (200 * 2**20))
print(len(held), flush=True)
sys.stdin.read()
"""


@linux
def test_resident_memory_counts_a_grandchild_another_thread_started() -> None:
    """The soak's and scale bench's RSS (``tree_rss_bytes``): a descendant's memory counts
    while it lives, two levels down, started by a thread other than the main one."""
    grandparent = "import subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[1]])"
    started: list[subprocess.Popen[str]] = []
    ready, read = threading.Event(), threading.Event()

    def start_child() -> None:
        child = subprocess.Popen(
            [sys.executable, "-c", grandparent, HOLD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        child.stdout.readline()  # the grandchild holds its 200 MiB
        started.append(child)
        ready.set()
        read.wait()

    before = tree_rss_bytes(os.getpid())
    thread = threading.Thread(target=start_child)
    thread.start()
    ready.wait()
    try:
        assert tree_rss_bytes(os.getpid()) >= before + 190 * 2**20
    finally:
        read.set()
        thread.join()
        _end(started[0])
    assert tree_rss_bytes(started[0].pid) == 0  # gone: nothing to read

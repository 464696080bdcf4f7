"""``bench requests``' CPU readings (:mod:`streamctl.bench.process_cpu`) count a process's
descendants while they live and after they were waited for, as the coordinator worker's pass
processes are; and the per-request figures count a reading that went down (a backend that
ended) as nothing rather than as negative CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from streamctl.bench.process_cpu import tree_cpu_seconds
from streamctl.bench.requests import cpu_per_request

BURN = """
import sys, time
while time.process_time() < 0.3:
    pass
print(time.process_time(), flush=True)
sys.stdin.read()
"""

TICK = 0.02
"""The readings' granularity (clock ticks, at 100 a second), twice."""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_a_child_counts_while_it_lives_and_after_it_was_waited_for() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdin is not None
    burnt = float(child.stdout.readline())  # the child's own count of the CPU it used
    own = time.process_time()
    alive = tree_cpu_seconds(os.getpid())
    assert alive >= own + burnt - TICK
    child.stdin.close()
    child.wait()  # its CPU moves to this process's count of waited-for children
    assert tree_cpu_seconds(os.getpid()) >= alive - TICK
    assert tree_cpu_seconds(child.pid) == 0.0  # gone: nothing to read


def test_per_request_figures_count_a_reading_that_went_down_as_nothing() -> None:
    before = {"client": 1.0, "postgres": 5.0}
    after = {"client": 3.0, "postgres": 4.0}
    assert cpu_per_request(before, after, 1000) == {
        "client": 2000.0,
        "postgres": 0.0,
        "total": 2000.0,
    }

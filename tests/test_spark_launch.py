"""The driver JVM's launch (:mod:`streamctl.agent.spark_session`): without a ``preexec_fn``
(unsafe in a process with threads), in a process group of its own, and bounded: a build that
does not finish in time has the JVMs it launched killed, so that it fails instead of hanging."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

import pyspark.java_gateway
import pytest

from streamctl.agent import spark_session
from streamctl.agent.spark_session import driver_process


def test_the_driver_jvm_has_a_process_group_of_its_own(spark: Any) -> None:
    process = driver_process(spark)
    assert process is not None
    assert os.getpgid(process.pid) == process.pid != os.getpgid(0)


@pytest.mark.quick
def test_a_launch_is_made_without_preexec_fn(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Recorded:
        def __init__(self, command: list[str], **options: Any) -> None:
            seen.update(options)

    monkeypatch.setattr(spark_session.subprocess, "Popen", Recorded)
    spark_session._launch_driver(["java"], preexec_fn=lambda: None, stdin=-1)
    assert "preexec_fn" not in seen and seen["process_group"] == 0 and seen["stdin"] == -1


def test_a_build_that_takes_too_long_has_its_launches_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(spark_session, "LAUNCH_TIMEOUT_S", 0.5)
    with spark_session._launches_bounded():
        hung = pyspark.java_gateway.Popen(["sleep", "60"])  # as PySpark launches
        deadline = time.monotonic() + 30
        while hung.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    assert hung.returncode == -9


def test_a_build_that_finished_keeps_its_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_session, "LAUNCH_TIMEOUT_S", 0.5)
    with spark_session._launches_bounded():
        launched = pyspark.java_gateway.Popen(["sleep", "5"])
    assert pyspark.java_gateway.Popen is subprocess.Popen  # restored after the build
    time.sleep(1.0)
    try:
        assert launched.poll() is None
    finally:
        launched.kill()
        launched.wait()

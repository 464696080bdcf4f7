"""The agent's current Spark as its queries see it (:class:`SparkHandle`), and a fixed one for
tests and tools (:class:`FixedSpark`).

The agent's :class:`~streamctl.agent.spark_watchdog.SparkWatchdog` is the live handle: it
probes the session, rebuilds it when its driver JVM dies, and counts generations (one per
session built); :class:`~streamctl.agent.runs.SparkQueries` asks it whether a run's Spark
is still the live one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["FixedSpark", "SparkHandle"]


class SparkHandle(Protocol):
    """The agent's current Spark as its actions see it: the session, which generation of it
    (one per session the agent built), and whether it is alive
    (:class:`~streamctl.agent.spark_watchdog.SparkWatchdog`)."""

    @property
    def session(self) -> Any: ...

    @property
    def generation(self) -> int: ...

    @property
    def up(self) -> bool: ...

    def still_up(self, generation: int) -> bool:
        """Whether the Spark of ``generation`` is the live one (probes it now)."""
        ...

    def wait_until_up(self, timeout: float, on_wait: Callable[[], None] | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) while Spark is being rebuilt; whether it is up."""
        ...

    def kill(self, generation: int, reason: str) -> bool:
        """Kill the Spark of ``generation`` (and rebuild it); whether it is gone now."""
        ...


class FixedSpark:
    """One session taken to be alive for good (tests and tools running queries without an
    agent's watchdog)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.generation = 1
        self.up = True

    def still_up(self, generation: int) -> bool:
        return True

    def wait_until_up(self, timeout: float, on_wait: Callable[[], None] | None = None) -> bool:
        return True

    def kill(self, generation: int, reason: str) -> bool:
        return False  # not this handle's to kill

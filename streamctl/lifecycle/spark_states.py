"""The lifecycle of an agent's Spark (its SparkSession and driver JVM), and which query a death
of it is blamed on. Pure: the agent (:mod:`streamctl.agent.spark_watchdog`,
:mod:`streamctl.agent.runs`) applies it.

States
------
``UP``      the session answers: its driver JVM runs and its SparkContext is not stopped.
``DOWN``    the agent found its Spark dead (the driver JVM gone, the SparkContext stopped, or no
            answer within the probe timeout). The old JVM is killed (nothing it ran writes any
            more), its queries are reported lost, and a new session is being built; actions
            wait for ``UP`` (bounded) or fail with a retryable error.
``BROKEN``  the agent could not bring Spark back, or it died too often: the agent unregisters and
            exits, so its queries recover on other agents (a supervisor may restart it).

Blame and containment
---------------------
A death of Spark by itself (not a JVM killed from outside by a signal) is blamed on at most one
query (:func:`suspect`): the one whose unfinished work had run longest when Spark died (a
micro-batch in progress since its last completed one, or a start under way), else, among runs
that had not completed a micro-batch yet and started within the suspect window, one blamed
before, then the most recently started. The suspect's crash counts against it
(:class:`Strikes`); after ``max_strikes`` it is contained: it ends ``FAILED`` instead of
restarting. Every other query lost with Spark is not at fault: it
restarts at once and the crash does not count against its restarts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class SparkState(StrEnum):
    UP = "UP"
    DOWN = "DOWN"
    BROKEN = "BROKEN"


class SparkTrigger(StrEnum):
    LOST = "lost"  # a probe found the JVM gone, the SparkContext stopped, or no answer
    RECREATED = "recreated"  # a new session (on a new JVM) answers
    GIVE_UP = "give_up"  # it could not be rebuilt, or it died too often


TRANSITIONS: dict[tuple[SparkState, SparkTrigger], SparkState] = {
    (SparkState.UP, SparkTrigger.LOST): SparkState.DOWN,
    (SparkState.DOWN, SparkTrigger.RECREATED): SparkState.UP,
    (SparkState.DOWN, SparkTrigger.GIVE_UP): SparkState.BROKEN,
}
"""Every allowed transition; ``BROKEN`` is final (the agent process ends)."""


class IllegalTransition(Exception):
    def __init__(self, state: SparkState, trigger: SparkTrigger) -> None:
        super().__init__(f"Spark in state {state} cannot take '{trigger}'")


def transition(state: SparkState, trigger: SparkTrigger) -> SparkState:
    try:
        return TRANSITIONS[(state, trigger)]
    except KeyError:
        raise IllegalTransition(state, trigger) from None


@dataclass(frozen=True)
class SparkPolicy:
    """How an agent watches and rebuilds its Spark (seconds)."""

    probe_interval: float = 1.0
    """Between two health probes (and sweeps of the queries' state)."""
    probe_timeout: float = 15.0
    """A probe not answered in this time means a hung JVM (a heap thrashing in GC)."""
    rebuild_attempts: int = 3
    """Attempts to build a new session after one loss before giving up."""
    rebuild_backoff: float = 2.0
    max_losses: int = 5
    """More losses than this within ``loss_window`` and the agent gives up (``BROKEN``)."""
    loss_window: float = 600.0
    wait_for_spark: float = 90.0
    """How long an action waits for a Spark being rebuilt before failing (retryably)."""


@dataclass(frozen=True)
class Containment:
    """When a query that takes Spark down stops being restarted."""

    max_strikes: int = 2
    """Deaths of Spark blamed on one query (within ``memory``) before it is contained."""
    memory: float = 3600.0
    """A strike older than this is forgotten."""
    suspect_window: float = 60.0
    """A query that never completed a batch is a suspect only this long after its start."""


@dataclass(frozen=True)
class RunFacts:
    """What the agent knew about one lost run (or start under way) when Spark died
    (monotonic seconds)."""

    query_id: int
    started_at: float
    busy_since: float | None  # when its unfinished work began, as last observed; None: idle
    progressed: bool  # it completed a micro-batch on this Spark
    strikes: int = 0  # deaths of Spark blamed on the query before


def suspect(runs: Sequence[RunFacts], now: float, window: float) -> int | None:
    """The query a death of Spark is blamed on (see the module docstring), or None."""
    busy = [run for run in runs if run.busy_since is not None]
    if busy:
        return min(busy, key=lambda run: (run.busy_since, run.query_id)).query_id
    fresh = [run for run in runs if not run.progressed and now - run.started_at <= window]
    if fresh:
        return max(fresh, key=lambda run: (run.strikes, run.started_at, run.query_id)).query_id
    return None


@dataclass
class Strikes:
    """Deaths of Spark blamed on each query, forgotten after ``memory`` seconds."""

    memory: float
    _times: dict[int, list[float]] = field(default_factory=dict)

    def count(self, query_id: int, now: float) -> int:
        """The strikes of ``query_id`` within memory."""
        return sum(1 for t in self._times.get(query_id, []) if now - t <= self.memory)

    def add(self, query_id: int, now: float) -> int:
        """Count one more strike of ``query_id``; answers its strikes within memory."""
        recent = [t for t in self._times.get(query_id, []) if now - t <= self.memory]
        recent.append(now)
        self._times[query_id] = recent
        for other in [q for q, times in self._times.items() if now - times[-1] > self.memory]:
            del self._times[other]  # bounded by the queries blamed within memory
        return len(recent)

"""The lifecycle of a query (its current state), with every allowed transition in one place.

States (DESIGN §5)
------------------
``CREATED``     bound, checked and stored; not yet handed to an agent.
``STARTING``    placed on an agent; the start action is under way.
``RUNNING``     the agent reported the Spark query active.
``STOPPING``    a stop was asked for; the stop action is under way.
``STOPPED``     not running because a user asked so; can be started again.
``FINISHED``    bounded input fully processed and every window emitted.
``RECOVERING``  its agent died or the query crashed; waiting (with backoff) to start again,
                from its checkpoint, on whichever agent placement picks.
``FAILED``      the restart policy gave up; ``error`` holds the last reason.

Who moves a query: the pass, on requests (``StartQuery``, ``StopQuery``, ``Reoptimize``), on
events the agents push (``QueryStatusChanged``), on outcomes of the actions it dispatched, and
on liveness (an agent turning ``DEAD``). ``STOPPING`` or ``STOPPED`` with a desired state of
``RUNNING`` is a query being moved: once stopped it starts again on another agent. A
transition not in :data:`TRANSITIONS` raises :class:`IllegalTransition`; nothing is silently
overwritten.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class QueryState(StrEnum):
    CREATED = "CREATED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    FINISHED = "FINISHED"
    RECOVERING = "RECOVERING"
    FAILED = "FAILED"


class QueryTrigger(StrEnum):
    START = "start"  # the coordinator dispatches a start action to the placed agent
    STARTED = "started"  # the agent reports the Spark query active
    INPUT_DONE = "input_done"  # bounded input processed, every window emitted
    STOP = "stop"  # a user (or a drop) asks the query to stop
    MOVE = "move"  # reoptimization takes it off its agent, to start it on another one
    STOPPED = "stopped"  # the agent confirms the stop, or nothing was running
    CRASHED = "crashed"  # the start failed or the running query terminated with an error
    AGENT_LOST = "agent_lost"  # the query's agent became DEAD
    GIVE_UP = "give_up"  # the restart policy is exhausted


S = QueryState
T = QueryTrigger

TRANSITIONS: dict[tuple[QueryState, QueryTrigger], QueryState] = {
    (S.CREATED, T.START): S.STARTING,
    (S.STOPPED, T.START): S.STARTING,
    (S.FINISHED, T.START): S.STARTING,
    (S.RECOVERING, T.START): S.STARTING,
    (S.FAILED, T.START): S.STARTING,
    (S.STARTING, T.STARTED): S.RUNNING,
    (S.RECOVERING, T.STARTED): S.RUNNING,  # a late report from a start the agent completed
    (S.STARTING, T.INPUT_DONE): S.FINISHED,
    (S.RUNNING, T.INPUT_DONE): S.FINISHED,
    (S.CREATED, T.STOP): S.STOPPED,
    (S.STARTING, T.STOP): S.STOPPING,
    (S.RUNNING, T.STOP): S.STOPPING,
    # A move stops the query on its agent first (two agents must never write one checkpoint);
    # the stop's report then starts it elsewhere, because its desired state is still RUNNING.
    (S.RUNNING, T.MOVE): S.STOPPING,
    (S.RECOVERING, T.STOP): S.STOPPED,
    (S.FAILED, T.STOP): S.STOPPED,
    (S.FINISHED, T.STOP): S.STOPPED,
    (S.STOPPING, T.STOPPED): S.STOPPED,
    (S.STOPPING, T.AGENT_LOST): S.STOPPED,  # nothing runs any more: the stop is done
    (S.STARTING, T.CRASHED): S.RECOVERING,
    (S.RUNNING, T.CRASHED): S.RECOVERING,
    (S.STARTING, T.AGENT_LOST): S.RECOVERING,
    (S.RUNNING, T.AGENT_LOST): S.RECOVERING,
    (S.RECOVERING, T.GIVE_UP): S.FAILED,
}
"""Every allowed transition of a query's current state."""

ACTIVE_STATES = frozenset({S.STARTING, S.RUNNING, S.STOPPING, S.RECOVERING})
"""States in which a query holds (or is about to hold) a slot of an agent's capacity."""


class IllegalTransition(Exception):
    def __init__(self, state: QueryState, trigger: QueryTrigger) -> None:
        super().__init__(f"query in state {state} cannot take '{trigger}'")
        self.state = state
        self.trigger = trigger


def transition(state: QueryState, trigger: QueryTrigger) -> QueryState:
    try:
        return TRANSITIONS[(state, trigger)]
    except KeyError:
        raise IllegalTransition(state, trigger) from None


def can_transition(state: QueryState, trigger: QueryTrigger) -> bool:
    return (state, trigger) in TRANSITIONS


DATA_ERROR = re.compile(r"\[USER_RAISED_EXCEPTION\]|SQLSTATE: 22[0-9A-Z]{3}")
"""Spark errors raised by a query's input itself: SQL's data exceptions (class 22: a cast that
cannot take a value, a division by zero, an overflow) and the connectors' own checks of a field
(``raise_error``: a malformed CSV line, a value outside its type)."""


def fails_on_its_input(error: str) -> bool:
    """Whether a crash came from the data the query reads. A restart would read the same input
    from its checkpoint and fail the same way, so such a query fails at once (NebulaStream's
    runtime errors) instead of going through its restarts."""
    return DATA_ERROR.search(error) is not None


SPARK_LOST = "[SPARK_LOST]"
"""Opens an agent's crash report of a query that went down with its agent's Spark through no
fault of its own (:mod:`streamctl.lifecycle.spark`): it restarts at once and the crash does not
count against its restarts, as when its agent dies."""

SPARK_CONTAINED = "[CONTAINED]"
"""Opens an agent's crash report of a query that took its agent's Spark down too often: it ends
``FAILED`` at once instead of taking Spark (and the queries beside it) down again."""


def _tagged(tag: str) -> re.Pattern[str]:
    # The agent's own report, or the coordinator's "start on <agent> failed: <agent's error>".
    return re.compile(r"^(?:start on [^:\s]+ failed: )?" + re.escape(tag))


_SPARK_LOST_REPORT = _tagged(SPARK_LOST)
_CONTAINED_REPORT = _tagged(SPARK_CONTAINED)


def lost_with_its_spark(error: str) -> bool:
    """Whether a crash report says the query went down with its agent's Spark, not by itself."""
    return _SPARK_LOST_REPORT.match(error) is not None


def contained(error: str) -> bool:
    """Whether a crash report says the query took its agent's Spark down too often."""
    return _CONTAINED_REPORT.match(error) is not None


@dataclass(frozen=True)
class RestartPolicy:
    """How often and how soon a crashed query starts again before it ends ``FAILED``.

    Attempt ``n`` (1-based) waits ``initial_delay * factor**(n-1)`` seconds, at most
    ``max_delay``; after ``max_restarts`` restarts without reaching ``RUNNING`` for
    ``healthy_after`` seconds the query gives up.
    """

    max_restarts: int = 5
    initial_delay: float = 1.0
    factor: float = 2.0
    max_delay: float = 60.0
    healthy_after: float = 60.0

    def delay(self, attempt: int) -> float:
        if attempt < 1:
            raise ValueError(f"restart attempts count from 1, got {attempt}")
        return float(min(self.max_delay, self.initial_delay * self.factor ** (attempt - 1)))

    def exhausted(self, attempt: int) -> bool:
        """Whether restart number ``attempt`` is one too many."""
        return attempt > self.max_restarts

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
``RUNNING`` is a query being moved (once stopped it starts again on another agent) or, when
``STOPPED``, a user's start that waits for a pass with room for starts. A
transition not in :data:`TRANSITIONS` raises :class:`IllegalTransition`; nothing is silently
overwritten.

Each transition is one function here (:func:`start`, :func:`started`, :func:`finished`,
:func:`stopped`, :func:`crash`, :func:`agent_lost`, :func:`stop`, :func:`move`,
:func:`rerun`, :func:`stop_again`), which moves the query's current state **and** sets the
fields that go with entering its new state (its worker, its ``run``, ``retry_at``,
``restarts``, ``error``, ``started_at``); :func:`created` gives a new query's. They work on
:class:`QueryFields` (the catalog's ``QueryRow`` has them; the catalog imports this module,
not the other way round). The pass (:mod:`streamctl.domain.queries`,
:mod:`streamctl.domain.reoptimize`) calls them and keeps its own side: placement, agent
actions, changelog records, stamping the row.

Entry effects, by state (the property tests of ``tests/test_lifecycle.py`` check them):

``STARTING``    on the placed agent (``worker``), with a new ``run`` (``run + 1``, which the
                agent's reports carry), no retry pending.
``RUNNING``     ``started_at`` is when the agent reported it; ``error`` is cleared.
``STOPPING``    keeps its worker until the agent confirms the stop; ``retry_at`` is when a
                stop may be sent again (:data:`STOP_AGAIN_AFTER`) if the agent still reports
                the run.
``STOPPED``, ``FINISHED``  hold no worker.
``RECOVERING``  holds no worker; ``retry_at`` is when it may start again; a crash counts
                against ``restarts`` (unless it went down with its agent's Spark).
``FAILED``      holds no worker, no retry pending; ``error`` is why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, Protocol, TypedDict


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
    AGENT_BACK = "agent_back"  # its agent registered again: start it there again, in a new run
    STOP_AGAIN = "stop_again"  # its agent still reports the run it was asked to stop


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
    (S.STOPPING, T.INPUT_DONE): S.FINISHED,  # its input ended before the stop came
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
    # Its agent may have restarted and lost it: the start is sent again (agents start
    # idempotently) with a new run, and the query is STARTING until the agent reports it
    # running again; RUNNING would claim a Spark query that may no longer exist.
    (S.STARTING, T.AGENT_BACK): S.STARTING,
    (S.RUNNING, T.AGENT_BACK): S.STARTING,
    # The stop (and the workflow's rounds of retrying it) did not end the run: the agent still
    # reports it running. The stop is sent again; the query stays STOPPING until it is done.
    (S.STOPPING, T.STOP_AGAIN): S.STOPPING,
}
"""Every allowed transition of a query's current state."""

STOP_AGAIN_AFTER = 3000.0
"""Seconds after a stop was sent before a ``STOPPING`` query whose agent still reports the run
gets another stop: longer than the workflow's own rounds of retrying a failed or unclaimed
stop can last (``streamctl.workflows.agent_calls``: 6 rounds of up to 3 attempts, each up to
20 s waiting for pickup and 120 s running, 10 s apart; ``tests/test_lifecycle.py`` checks the
relation), so that only a stop those rounds gave up on is sent again, once per period, and
stops of one run never pile up on a busy agent."""

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
fault of its own (:mod:`streamctl.lifecycle.spark_states`): it restarts at once and the crash does
not
count against its restarts, as when its agent dies."""

SPARK_CONTAINED = "[CONTAINED]"
"""Opens an agent's crash report of a query that took its agent's Spark down too often: it ends
``FAILED`` at once instead of taking Spark (and the queries beside it) down again."""


_FAILED_START = r"start on [^:\s]+ failed: "
"""Opens the coordinator's own ``CRASHED`` report of a start action that failed
(``streamctl.workflows.agent_calls``): "start on <agent> failed: <agent's error>"."""
_FAILED_START_REPORT = re.compile("^" + _FAILED_START)


def from_a_failed_start(error: str) -> bool:
    """Whether a crash report is the coordinator's of a start that failed (the start may
    still land on the agent), not the agent's own word that the run ended."""
    return _FAILED_START_REPORT.match(error) is not None


def _tagged(tag: str) -> re.Pattern[str]:
    # The agent's own report, or the coordinator's of a failed start quoting the agent's.
    return re.compile(f"^(?:{_FAILED_START})?" + re.escape(tag))


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


# --- the transitions, each with its state-entry effects -------------------------------------


class QueryFields(Protocol):
    """The fields of a query that its lifecycle sets (the catalog's ``QueryRow`` has them)."""

    current_state: str
    worker: str | None
    run: int
    restarts: int
    retry_at: float | None
    started_at: float | None
    error: str | None
    statistics: dict[str, Any] | None
    statistics_at: float | None


class CreatedFields(TypedDict):
    """A new query's lifecycle fields (:func:`created`)."""

    current_state: str
    worker: str | None
    error: str | None
    run: int
    restarts: int
    retry_at: float | None
    started_at: float | None


class Step(NamedTuple):
    """One move of a query's current state."""

    before: QueryState
    after: QueryState

    @property
    def action(self) -> str:
        """The move as the changelog names it (``RUNNING->STOPPING``)."""
        return f"{self.before}->{self.after}"


def _enter(row: QueryFields, trigger: QueryTrigger) -> Step:
    before = QueryState(row.current_state)
    after = transition(before, trigger)
    row.current_state = after
    return Step(before, after)


def created() -> CreatedFields:
    """A new query: ``CREATED``, on no agent, not run yet, no restarts, nothing pending."""
    return CreatedFields(
        current_state=S.CREATED,
        worker=None,
        error=None,
        run=0,
        restarts=0,
        retry_at=None,
        started_at=None,
    )


def start(row: QueryFields, agent: str, *, fresh_budget: bool = False) -> Step:
    """``START``: to ``STARTING`` on ``agent``, in a new run (``run + 1``: the agent's reports
    carry it, so reports of earlier runs are told apart), no retry pending. ``fresh_budget``
    (a user's ``StartQuery``, a reoptimization's restart) counts its restarts from 0 again."""
    step = _enter(row, T.START)
    if fresh_budget:
        row.restarts = 0
    row.worker = agent
    row.run += 1
    row.retry_at = None
    return step


def started(row: QueryFields, now: float) -> Step:
    """``STARTED``: the agent reports it ``RUNNING`` at ``now`` (the clock of
    :attr:`RestartPolicy.healthy_after` starts); the last error is cleared."""
    step = _enter(row, T.STARTED)
    row.started_at = now
    row.error = None
    return step


def finished(row: QueryFields) -> Step:
    """``INPUT_DONE``: ``FINISHED``; it holds no agent any more, and no stop is pending."""
    step = _enter(row, T.INPUT_DONE)
    row.worker = None
    row.retry_at = None
    return step


def stopped(row: QueryFields) -> Step:
    """``STOPPED``: the agent confirmed the stop; it holds no agent any more, and no stop is
    pending."""
    step = _enter(row, T.STOPPED)
    row.worker = None
    row.retry_at = None
    return step


def crash(row: QueryFields, error: str, now: float, policy: RestartPolicy) -> tuple[Step, str]:
    """``CRASHED`` (then ``GIVE_UP`` if it ends ``FAILED``): it holds no agent; ``error`` is
    the crash report. The answer is the move and its reason.

    * A crash of its input (:func:`fails_on_its_input`) or a contained one (:func:`contained`)
      ends ``FAILED`` at once.
    * A query lost with its agent's Spark (:func:`lost_with_its_spark`) recovers at once and
      the crash costs it no restart (the agent bounds how often its Spark may die).
    * Otherwise the crash counts (from 1 again after ``healthy_after`` seconds ``RUNNING``):
      ``FAILED`` once the policy is exhausted, else ``RECOVERING`` until its backoff passed.
    """
    before = QueryState(row.current_state)
    recovering = transition(before, T.CRASHED)
    healthy = row.started_at is not None and now - row.started_at >= policy.healthy_after
    lost = lost_with_its_spark(error)
    if not lost:
        row.restarts = 1 if healthy else row.restarts + 1
    row.error = error
    agent = row.worker
    row.worker = None
    if fails_on_its_input(error):
        after = transition(recovering, T.GIVE_UP)
        row.retry_at = None
        reason = "failed on its input (a restart would fail the same way)"
    elif contained(error):
        after = transition(recovering, T.GIVE_UP)
        row.retry_at = None
        reason = "took its agent's Spark down too often (contained)"
    elif lost:
        after = recovering
        row.retry_at = now
        reason = f"lost with the Spark of {agent}, restarts at once"
    elif policy.exhausted(row.restarts):
        after = transition(recovering, T.GIVE_UP)
        row.retry_at = None
        reason = f"gave up after {row.restarts - 1} restarts"
    else:
        after = recovering
        row.retry_at = now + policy.delay(row.restarts)
        reason = f"crashed on {agent}, restart {row.restarts} in {policy.delay(row.restarts):.1f}s"
    row.current_state = after
    return Step(before, after), reason


def agent_lost(row: QueryFields, now: float) -> Step:
    """``AGENT_LOST``: its agent is gone, so it holds none. A query that was starting or
    running recovers elsewhere at once (``retry_at`` is ``now``; it costs no restart); one
    that was stopping is stopped."""
    step = _enter(row, T.AGENT_LOST)
    row.worker = None
    row.retry_at = now if step.after is S.RECOVERING else None
    return step


def stop(row: QueryFields, now: float) -> tuple[Step, str | None]:
    """``STOP``: a query on an agent goes ``STOPPING`` and keeps its worker until the agent
    confirms; the answer's agent is the one to send a stop action to, at ``now`` (no stop again
    before :data:`STOP_AGAIN_AFTER`). Any other query is ``STOPPED`` at once, on no agent, with
    no retry pending (the answer's agent is None)."""
    step = _enter(row, T.STOP)
    if step.after is S.STOPPING and row.worker is not None:
        row.retry_at = now + STOP_AGAIN_AFTER
        return step, row.worker
    row.worker = None
    row.retry_at = None
    return step, None


def move(row: QueryFields, now: float) -> Step:
    """``MOVE``: a ``RUNNING`` query goes ``STOPPING`` to leave its agent, whose stop is sent at
    ``now`` (no stop again before :data:`STOP_AGAIN_AFTER`); its lag streak is cleared (the
    next agent's statistics start a new one)."""
    step = _enter(row, T.MOVE)
    row.retry_at = now + STOP_AGAIN_AFTER
    row.statistics = None
    row.statistics_at = None
    return step


def stop_again(row: QueryFields, now: float, *, due: bool = False) -> Step | None:
    """``STOP_AGAIN``: the agent of a ``STOPPING`` query reports the run it was asked to stop
    as still running. Once the last stop is :data:`STOP_AGAIN_AFTER` old (or at once when
    ``due``: the agent registered again, its earlier stops are moot), a stop is sent again to
    its worker (the answer is the step; ``None`` while the last stop is younger) and the next
    may go :data:`STOP_AGAIN_AFTER` after this one."""
    if not can_transition(QueryState(row.current_state), T.STOP_AGAIN):
        raise IllegalTransition(QueryState(row.current_state), T.STOP_AGAIN)
    if not due and row.retry_at is not None and row.retry_at > now:
        return None
    step = _enter(row, T.STOP_AGAIN)
    row.retry_at = now + STOP_AGAIN_AFTER
    return step


def rerun(row: QueryFields) -> Step:
    """``AGENT_BACK``: its agent registered again; the start is sent there again in a new
    run (``run + 1``) and the query is ``STARTING`` on that agent until it reports the run
    (a restarted agent has lost its Spark queries)."""
    step = _enter(row, T.AGENT_BACK)
    row.run += 1
    return step

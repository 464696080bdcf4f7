"""The phases of one coordinator run, with every allowed transition in one place.

Phases
------
``SERVING``   the run takes requests and events and runs passes; continue-as-new is not due.
``DRAINING``  continue-as-new is due: passes decide no starts (a pass's ``action_room`` is 0)
              and requests that start a query (:data:`STARTS_WAIT_FOR_NEXT_RUN`) are refused
              ``ContinuingAsNew``; everything else is still answered while the actions under
              way end, up to ``action_drain_timeout`` (:attr:`RunPhaseMachine.drain_deadline`).
``CLOSING``   the run refuses every new update (``ContinuingAsNew``), answers what it
              accepted, waits for its handlers and continues as new from a quiet workflow task
              (:mod:`.continue_as_new`).

Triggers (:data:`TRANSITIONS`)
------------------------------
``DUE``           continue-as-new became due in a run with ``serve-while-draining``
                  (:data:`~streamctl.workflows.patches.SERVE_WHILE_DRAINING`):
                  ``SERVING -> DRAINING``; the drain's deadline is set.
``DUE_REFUSING``  continue-as-new became due in a run recorded before that patch:
                  ``SERVING -> CLOSING`` at once (such a run refused requests for the whole
                  drain, which it waits out while closing).
``DRAINED``       no action is under way or waiting, or the drain's deadline passed:
                  ``DRAINING -> CLOSING``.

A run never goes back: no transition leaves ``CLOSING``, which ends in continue-as-new. A pair
not in :data:`TRANSITIONS` raises :class:`IllegalRunTransition`. The machine is plain,
deterministic data: it reads no clock (the workflow hands it ``now``) and issues no command.
"""

from __future__ import annotations

from enum import StrEnum

from streamctl.protocol.messages import StartQuery


class RunPhase(StrEnum):
    SERVING = "serving"
    DRAINING = "draining"
    CLOSING = "closing"


class RunTrigger(StrEnum):
    DUE = "due"  # continue-as-new is due; the run serves while its actions drain
    DUE_REFUSING = "due_refusing"  # continue-as-new is due in a run before serve-while-draining
    DRAINED = "drained"  # no action left, or the drain's deadline passed


P = RunPhase
T = RunTrigger

TRANSITIONS: dict[tuple[RunPhase, RunTrigger], RunPhase] = {
    (P.SERVING, T.DUE): P.DRAINING,
    (P.SERVING, T.DUE_REFUSING): P.CLOSING,
    (P.DRAINING, T.DRAINED): P.CLOSING,
}
"""Every allowed transition of a run's phase."""

STARTS_WAIT_FOR_NEXT_RUN = frozenset({StartQuery.kind})
"""Requests a run refuses (``ContinuingAsNew``) once continue-as-new is due: they start a query
now or fail, and a draining run decides no starts."""


class IllegalRunTransition(Exception):
    def __init__(self, phase: RunPhase, trigger: RunTrigger) -> None:
        super().__init__(f"a run in phase {phase} cannot take '{trigger}'")
        self.phase = phase
        self.trigger = trigger


def transition(phase: RunPhase, trigger: RunTrigger) -> RunPhase:
    try:
        return TRANSITIONS[(phase, trigger)]
    except KeyError:
        raise IllegalRunTransition(phase, trigger) from None


def can_transition(phase: RunPhase, trigger: RunTrigger) -> bool:
    return (phase, trigger) in TRANSITIONS


class RunPhaseMachine:
    """A run's current phase and what goes with it: whether the run serves while draining
    (decided once, at the top of the run, by its patch) and the drain's deadline."""

    def __init__(self) -> None:
        self.phase = RunPhase.SERVING
        self.serve_while_draining = False
        """Whether the run has :data:`~streamctl.workflows.patches.SERVE_WHILE_DRAINING`."""
        self.drain_deadline: float | None = None
        """When the run stops waiting for its actions under way before continuing as new."""

    @property
    def ending(self) -> bool:
        """Continue-as-new is due (``DRAINING`` or ``CLOSING``): the run decides no starts."""
        return self.phase is not RunPhase.SERVING

    @property
    def draining(self) -> bool:
        return self.phase is RunPhase.DRAINING

    @property
    def closing(self) -> bool:
        """The run refuses new updates and continues as new once the accepted ones are
        answered."""
        return self.phase is RunPhase.CLOSING

    def _take(self, trigger: RunTrigger) -> None:
        self.phase = transition(self.phase, trigger)

    def continue_as_new_due(self, now: float, drain_timeout: float) -> None:
        """``DUE`` (the drain's deadline is ``drain_timeout`` from ``now``) or, in a run
        without serve-while-draining, ``DUE_REFUSING``. A run already ending stays as it
        is: continue-as-new, once due, stays due."""
        if self.ending:
            return
        if self.serve_while_draining:
            self._take(RunTrigger.DUE)
            self.drain_deadline = now + drain_timeout
        else:
            self._take(RunTrigger.DUE_REFUSING)

    def drained(self) -> None:
        """``DRAINED``: ``DRAINING -> CLOSING``."""
        self._take(RunTrigger.DRAINED)

    def drain_over(self, now: float, no_actions: bool) -> bool:
        """Whether a draining run has waited enough for its actions: none is left under way
        or waiting, or the drain's deadline has passed (the next run runs the rest)."""
        if no_actions:
            return True
        return self.drain_deadline is not None and now >= self.drain_deadline

    def drain_time_left(self, now: float, drain_timeout: float) -> float:
        """Seconds left to wait for the actions under way, ``drain_timeout`` in all from the
        first time it is asked when no deadline was set yet (a run closing without
        serve-while-draining waits out its drain while closing, and a quiet check that fails
        comes back: the wait must not start over)."""
        if self.drain_deadline is None:
            self.drain_deadline = now + drain_timeout
        return self.drain_deadline - now

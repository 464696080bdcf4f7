"""When a coordinator run checks its agents' liveness, and how late a check is.

Protocol
--------
Each pass tells the run when liveness must next be checked (``PassResult.
next_liveness_deadline``, kept in ``CoordinatorState.next_liveness_deadline``). The loop waits
no longer than that (:meth:`LivenessClock.until_deadline`) and, once the deadline has passed,
adds a ``CheckLiveness`` event (:func:`liveness_check`) for the next pass
(:meth:`LivenessClock.overdue`, which clears the deadline: the pass answers the next one).

The check's ``late_by`` is the part of its delay in which no workflow task ran: the time the
coordinator may have been deaf (its workers or the Temporal server down). A busy coordinator
sees its timers late (a pass runs first), yet hears every heartbeat meanwhile: every signal
sent before a workflow task starts is delivered in it. Counting that delay as a stall credited
dead agents with it (and at least half a suspect interval) at every late check: under ``bench
scale``'s load they were declared DEAD after 74 s instead of ``dead_after``'s 30. So the clock
notes the workflow times of the two latest tasks seen to run (:meth:`LivenessClock.heard`: a
message arrived, a pass returned), in the carried state (``heard_at``, ``heard_before``).

Deterministic: times are handed in (the workflow's clock); the state is updated in place.
"""

from __future__ import annotations

from datetime import timedelta

from streamctl.protocol.messages import CheckLiveness, Envelope
from streamctl.workflows.state import CoordinatorState


def liveness_check(pass_no: int, late_by: float = 0.0) -> Envelope:
    """The workflow's own ``CheckLiveness`` event (``late_by`` only rides in the body: replaying
    an older history runs the same commands)."""
    return CheckLiveness(late_by=round(late_by, 3)).to_envelope(f"~liveness-{pass_no}")


class LivenessClock:
    """The liveness deadline and when the run last heard its agents (in the carried state)."""

    def __init__(self, state: CoordinatorState) -> None:
        self._state = state

    def heard(self, now: float) -> None:
        """Note that a workflow task runs at ``now``."""
        state = self._state
        if state.heard_at != now:
            state.heard_before = state.heard_at
            state.heard_at = now

    def heard_before(self, now: float) -> float | None:
        """When the latest workflow task before the one at ``now`` ran (None: none seen)."""
        state = self._state
        if state.heard_at is not None and state.heard_at < now:
            return state.heard_at
        return state.heard_before

    def until_deadline(self, now: float) -> timedelta | None:
        """How long the loop may wait before the next check is due (None: no deadline)."""
        deadline = self._state.next_liveness_deadline
        if deadline is None:
            return None
        return timedelta(seconds=max(0.001, deadline - now + 0.001))

    def overdue(self, now: float) -> float | None:
        """When the deadline has passed at ``now``: clear it and answer how long the
        coordinator stalled past it (the check's ``late_by``); else None."""
        deadline = self._state.next_liveness_deadline
        if deadline is None or now < deadline:
            return None
        self._state.next_liveness_deadline = None  # the pass answers the next one
        heard = self.heard_before(now)
        return now - max(deadline, heard if heard is not None else deadline)

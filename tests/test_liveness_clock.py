"""The coordinator's liveness deadline and how late a check is
(:mod:`streamctl.workflows.liveness_clock`)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamctl.workflows.liveness_clock import LivenessClock, liveness_check
from streamctl.workflows.state import CoordinatorState

pytestmark = pytest.mark.quick


def test_heard_keeps_the_two_latest_task_times() -> None:
    state = CoordinatorState()
    clock = LivenessClock(state)
    assert clock.heard_before(5.0) is None
    clock.heard(5.0)
    clock.heard(5.0)  # the same task again: nothing moves
    assert (state.heard_at, state.heard_before) == (5.0, None)
    clock.heard(8.0)
    assert (state.heard_at, state.heard_before) == (8.0, 5.0)
    assert clock.heard_before(9.0) == 8.0  # a later task: the latest one before it
    assert clock.heard_before(8.0) == 5.0  # within the latest task: the one before


def test_the_loop_waits_until_the_deadline() -> None:
    state = CoordinatorState(next_liveness_deadline=10.0)
    clock = LivenessClock(state)
    assert clock.until_deadline(4.0) == timedelta(seconds=6.001)
    assert clock.until_deadline(20.0) == timedelta(seconds=0.001)
    state.next_liveness_deadline = None
    assert clock.until_deadline(4.0) is None


def test_a_check_is_late_only_by_the_time_no_task_ran() -> None:
    state = CoordinatorState(next_liveness_deadline=10.0)
    clock = LivenessClock(state)
    assert clock.overdue(9.0) is None
    assert state.next_liveness_deadline == 10.0
    # Deaf since before the deadline: the whole delay counts.
    clock.heard(2.0)
    assert clock.overdue(25.0) == 15.0
    assert state.next_liveness_deadline is None  # the pass answers the next one
    assert clock.overdue(30.0) is None
    # A busy coordinator that ran tasks after the deadline: only the time since the last one.
    state.next_liveness_deadline = 40.0
    clock.heard(48.0)
    clock.heard(50.0)
    assert clock.overdue(50.0) == 2.0


def test_the_check_event_carries_its_lateness_rounded() -> None:
    envelope = liveness_check(7, late_by=1.23456)
    assert (envelope.id, envelope.kind) == ("~liveness-7", "CheckLiveness")
    assert envelope.body["late_by"] == 1.235
    assert liveness_check(8).body["late_by"] == 0.0

"""The continue-as-new gate (:mod:`streamctl.workflows.continue_as_new`): when a run is due,
and which workflow task may continue it as new."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamctl.protocol.agent_contract import AgentAction, StopAssignment
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.protocol.messages import Envelope
from streamctl.protocol.pass_io import PendingMessage
from streamctl.workflows.continue_as_new import (
    CALM_EVENTS,
    QUIET_ATTEMPTS,
    QUIET_EVENTS,
    RUN_LENGTH_BACKSTOP,
    RUN_LENGTH_BACKSTOP_EVENTS,
    STARTS_DEFER_LIMIT,
    STARTS_DEFER_MAX_BYTES,
    STARTS_DEFER_MAX_EVENTS,
    ContinueAsNewGate,
    HistoryFacts,
    carried_state,
)
from streamctl.workflows.state import CoordinatorState

pytestmark = pytest.mark.quick

CONFIG = CoordinatorConfig(passes_per_run=100, max_history_events=1000)


def history(length: int = 10, size: int = 1000, suggested: bool = False) -> HistoryFacts:
    return HistoryFacts(length=length, size=size, continue_as_new_suggested=suggested)


def gate(passes: int = 0, **flags: bool) -> ContinueAsNewGate:
    made = ContinueAsNewGate(CONFIG)
    for name, value in flags.items():
        setattr(made, name, value)
    for _ in range(passes):
        made.pass_done(starts_waiting=False)
    return made


def test_due_after_the_passes_of_a_run_at_the_history_length_or_when_suggested() -> None:
    assert not gate(passes=99).due(history(), ending=False)
    assert gate(passes=100).due(history(), ending=False)
    assert not gate().due(history(length=999), ending=False)
    assert gate().due(history(length=1000), ending=False)
    assert gate().due(history(suggested=True), ending=False)


def test_starts_waiting_put_it_off_within_the_deferral_limits() -> None:
    deferring = gate(defer_for_starts=True)
    deferring.pass_done(starts_waiting=True)
    assert deferring.passes_this_run == 1
    assert not deferring.due(history(length=1000, suggested=True), ending=False)
    limit = min(STARTS_DEFER_LIMIT * CONFIG.max_history_events, STARTS_DEFER_MAX_EVENTS)
    assert not deferring.due(history(length=limit - 1), ending=False)
    assert deferring.due(history(length=limit), ending=False)
    assert deferring.due(history(length=1000, size=STARTS_DEFER_MAX_BYTES), ending=False)
    assert deferring.due(history(length=1000), ending=True)  # an ending run defers nothing
    for _ in range(CONFIG.passes_per_run):
        deferring.pass_done(starts_waiting=True)
    assert deferring.due(history(), ending=False)
    # Without the patch, or without starts waiting, nothing is put off.
    assert gate().due(history(length=1000), ending=False)
    waiting = gate()
    waiting.pass_done(starts_waiting=True)
    assert waiting.due(history(length=1000), ending=False)


def test_a_task_with_nothing_but_the_timer_is_quiet() -> None:
    quiet = gate(quiet=True, calm=True)
    quiet.arm_quiet_check()
    assert quiet.quiet_after_timer(armed_at=500, length=500 + QUIET_EVENTS)
    busy = gate(quiet=True, calm=True)
    busy.arm_quiet_check()
    assert not busy.quiet_after_timer(armed_at=500, length=500 + QUIET_EVENTS + 1)
    assert busy.calmest_timer_task == QUIET_EVENTS + 1


def test_past_the_quiet_attempts_a_calm_task_will_do() -> None:
    calm = gate(quiet=True, calm=True)
    for _ in range(QUIET_ATTEMPTS - 1):
        calm.arm_quiet_check()
        assert not calm.quiet_after_timer(armed_at=0, length=8)
    calm.arm_quiet_check()
    assert calm.calmest_timer_task == 8
    assert not calm.quiet_after_timer(armed_at=0, length=8 + CALM_EVENTS + 1)
    calm.arm_quiet_check()
    assert calm.quiet_after_timer(armed_at=0, length=8 + CALM_EVENTS)
    # Without the calm patch, any timer's task past the attempts.
    anything = gate(quiet=True)
    for _ in range(QUIET_ATTEMPTS):
        anything.arm_quiet_check()
    assert anything.quiet_after_timer(armed_at=0, length=500)


def test_a_run_grown_past_the_backstop_continues_from_any_timer_task() -> None:
    stormy = gate(quiet=True, calm=True)
    stormy.calmest_timer_task = 6
    for _ in range(QUIET_ATTEMPTS):
        stormy.arm_quiet_check()
    backstop = min(RUN_LENGTH_BACKSTOP * CONFIG.max_history_events, RUN_LENGTH_BACKSTOP_EVENTS)
    assert not stormy.quiet_after_timer(armed_at=backstop - 100, length=backstop - 1)
    assert stormy.quiet_after_timer(armed_at=backstop - 100, length=backstop)


@given(st.lists(st.integers(QUIET_EVENTS, 200), min_size=1, max_size=40))
def test_the_calmest_timer_task_is_the_fewest_events_seen(spans: list[int]) -> None:
    calm = gate(quiet=True, calm=True)
    for span in spans:
        calm.arm_quiet_check()
        quiet = calm.quiet_after_timer(armed_at=100, length=100 + span)
        if span == QUIET_EVENTS:
            assert quiet
    others = [span for span in spans if span != QUIET_EVENTS]
    if others:
        assert calm.calmest_timer_task == min(others)


def test_the_carried_state_copies_what_the_next_run_needs() -> None:
    pending = [PendingMessage(Envelope("e1", "Heartbeat", {"name": "a"}), 1.0, 80, 3)]
    state = CoordinatorState(
        config=CONFIG,
        version=7,
        pass_no=12,
        pending=pending,
        sender_seqs={"s": 4},
        sender_seen_at={"s": 2.0},
        next_liveness_deadline=9.0,
        last_pass_ms=3.5,
        runs=2,
        arrivals=40,
        heard_at=8.0,
        heard_before=7.0,
    )
    actions = [AgentAction("a1", stop=StopAssignment(1, 1))]
    carried = carried_state(state, actions)
    assert dataclasses.asdict(carried) == {
        **dataclasses.asdict(state),
        "position_loaded": True,
        "runs": 3,
        "actions_under_way": dataclasses.asdict(carried)["actions_under_way"],
    }
    assert carried.actions_under_way == actions
    assert carried.pending == pending and carried.pending is not state.pending
    assert carried.sender_seqs is not state.sender_seqs


@given(st.lists(st.integers(min_value=1, max_value=10_000), max_size=20))
def test_the_next_run_numbers_its_arrivals_after_every_carried_message(seqs: list[int]) -> None:
    """Carried events keep their arrival numbers; a message arriving in the next run takes
    the next number, so it is ordered after all of them (the pass applies by number)."""
    pending = [
        PendingMessage(Envelope(f"e{i}", "Heartbeat", {"name": "a"}), 1.0, 80, seq)
        for i, seq in enumerate(seqs)
    ]
    state = CoordinatorState(config=CONFIG, pending=pending, arrivals=max(seqs, default=0))
    carried = carried_state(state, [])
    carried.arrivals += 1  # what MessageBuffer.next_arrival does for the next message
    assert all(carried.arrivals > message.seq for message in carried.pending)

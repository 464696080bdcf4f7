"""A coordinator run's phases (:mod:`streamctl.workflows.run_phase`): every transition of the
table is taken, every other pair is refused, and the machine's effects go with its moves."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamctl.workflows import run_phase
from streamctl.workflows.run_phase import RunPhase as P
from streamctl.workflows.run_phase import RunPhaseMachine
from streamctl.workflows.run_phase import RunTrigger as T

pytestmark = pytest.mark.quick


@given(st.sampled_from(P), st.sampled_from(T))
def test_a_transition_is_taken_exactly_when_the_table_lists_it(phase: P, trigger: T) -> None:
    if (phase, trigger) in run_phase.TRANSITIONS:
        assert run_phase.can_transition(phase, trigger)
        assert run_phase.transition(phase, trigger) is run_phase.TRANSITIONS[(phase, trigger)]
        return
    assert not run_phase.can_transition(phase, trigger)
    with pytest.raises(run_phase.IllegalRunTransition, match=f"{phase}.*'{trigger}'") as refused:
        run_phase.transition(phase, trigger)
    assert (refused.value.phase, refused.value.trigger) == (phase, trigger)


def test_every_pair_is_decided_by_the_table() -> None:
    legal = [pair for pair in itertools.product(P, T) if run_phase.can_transition(*pair)]
    assert sorted(legal) == sorted(run_phase.TRANSITIONS)
    assert len(legal) == 3


def test_a_run_never_goes_back_and_closing_is_final() -> None:
    order = [P.SERVING, P.DRAINING, P.CLOSING]
    for (before, _), after in run_phase.TRANSITIONS.items():
        assert order.index(after) > order.index(before)
    assert not any(before is P.CLOSING for before, _ in run_phase.TRANSITIONS)


def test_serving_while_draining_drains_before_it_closes() -> None:
    phases = RunPhaseMachine()
    phases.serve_while_draining = True
    assert (phases.phase, phases.ending, phases.closing) == (P.SERVING, False, False)
    phases.continue_as_new_due(now=100.0, drain_timeout=30.0)
    assert phases.phase is P.DRAINING
    assert (phases.ending, phases.draining, phases.closing) == (True, True, False)
    assert phases.drain_deadline == 130.0
    phases.continue_as_new_due(now=110.0, drain_timeout=30.0)  # still due: nothing moves
    assert (phases.phase, phases.drain_deadline) == (P.DRAINING, 130.0)
    phases.drained()
    assert (phases.phase, phases.ending, phases.draining, phases.closing) == (
        P.CLOSING,
        True,
        False,
        True,
    )
    with pytest.raises(run_phase.IllegalRunTransition):
        phases.drained()


def test_a_run_before_serve_while_draining_closes_at_once() -> None:
    phases = RunPhaseMachine()
    phases.continue_as_new_due(now=100.0, drain_timeout=30.0)
    assert (phases.phase, phases.drain_deadline) == (P.CLOSING, None)
    assert phases.ending and phases.closing and not phases.draining
    with pytest.raises(run_phase.IllegalRunTransition):
        phases.drained()
    # Its drain is waited out while it closes, from the first time it is asked.
    assert phases.drain_time_left(now=200.0, drain_timeout=30.0) == 30.0
    assert phases.drain_time_left(now=220.0, drain_timeout=30.0) == 10.0
    assert phases.drain_deadline == 230.0


def test_the_drain_is_over_with_no_action_left_or_at_its_deadline() -> None:
    phases = RunPhaseMachine()
    phases.serve_while_draining = True
    phases.continue_as_new_due(now=0.0, drain_timeout=10.0)
    assert not phases.drain_over(now=9.9, no_actions=False)
    assert phases.drain_over(now=9.9, no_actions=True)
    assert phases.drain_over(now=10.0, no_actions=False)
    assert not RunPhaseMachine().drain_over(now=1e9, no_actions=False)  # no deadline set


@given(
    st.booleans(),
    st.lists(st.sampled_from(["due", "drained", "time_left"]), max_size=12),
)
def test_any_sequence_of_moves_keeps_the_machine_consistent(
    serve_while_draining: bool, moves: list[str]
) -> None:
    phases = RunPhaseMachine()
    phases.serve_while_draining = serve_while_draining
    seen = [phases.phase]
    for now, move in enumerate(moves):
        before = phases.phase
        if move == "due":
            phases.continue_as_new_due(now=float(now), drain_timeout=5.0)
        elif move == "time_left":
            phases.drain_time_left(now=float(now), drain_timeout=5.0)
        elif run_phase.can_transition(before, T.DRAINED):
            phases.drained()
        else:
            with pytest.raises(run_phase.IllegalRunTransition):
                phases.drained()
            assert phases.phase is before
        seen.append(phases.phase)
    assert phases.ending == (phases.phase is not P.SERVING)
    assert phases.closing == (phases.phase is P.CLOSING)
    if not serve_while_draining:
        assert P.DRAINING not in seen
    order = [P.SERVING, P.DRAINING, P.CLOSING]
    assert [order.index(p) for p in seen] == sorted(order.index(p) for p in seen)

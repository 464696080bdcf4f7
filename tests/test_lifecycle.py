"""The query and agent state machines: allowed paths work, everything else is refused."""

from __future__ import annotations

import itertools

import pytest

from streamctl.lifecycle import agents, queries
from streamctl.lifecycle.queries import QueryState as S
from streamctl.lifecycle.queries import QueryTrigger as T


def walk(state: S, *triggers: T) -> S:
    for trigger in triggers:
        state = queries.transition(state, trigger)
    return state


def test_query_paths_of_design_section_5():
    assert walk(S.CREATED, T.START, T.STARTED, T.STOP, T.STOPPED) is S.STOPPED
    assert walk(S.CREATED, T.START, T.STARTED, T.INPUT_DONE) is S.FINISHED
    # agent dies, query is re-placed and resumes from its checkpoint
    assert walk(S.CREATED, T.START, T.STARTED, T.AGENT_LOST, T.START, T.STARTED) is S.RUNNING
    # crash loop ends FAILED; a user may start it again
    assert walk(S.RUNNING, T.CRASHED, T.START, T.CRASHED, T.GIVE_UP) is S.FAILED
    assert walk(S.FAILED, T.START, T.STARTED) is S.RUNNING
    assert walk(S.STOPPED, T.START) is S.STARTING


def test_every_unlisted_query_transition_is_illegal():
    for state, trigger in itertools.product(S, T):
        if (state, trigger) in queries.TRANSITIONS:
            assert queries.can_transition(state, trigger)
            continue
        assert not queries.can_transition(state, trigger)
        with pytest.raises(queries.IllegalTransition, match=f"{state}.*'{trigger}'"):
            queries.transition(state, trigger)


def test_terminal_states_only_leave_by_a_user_action():
    for state in (S.STOPPED, S.FINISHED, S.FAILED):
        leaving = {t for (s, t) in queries.TRANSITIONS if s is state}
        assert leaving <= {T.START, T.STOP}, state


def test_restart_policy_backs_off_exponentially_up_to_a_cap_and_gives_up():
    policy = queries.RestartPolicy(max_restarts=4, initial_delay=0.5, factor=2, max_delay=3)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert not policy.exhausted(4)
    assert policy.exhausted(5)
    with pytest.raises(ValueError):
        policy.delay(0)


def test_agent_heartbeat_after_death_is_refused():
    assert agents.transition(None, agents.AgentTrigger.REGISTER) is agents.AgentState.ALIVE
    with pytest.raises(agents.IllegalTransition):
        agents.transition(agents.AgentState.DEAD, agents.AgentTrigger.HEARTBEAT)

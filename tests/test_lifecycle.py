"""The query and agent state machines: allowed paths work, everything else is refused."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamctl.lifecycle import query_states as queries
from streamctl.lifecycle import worker_states as agents
from streamctl.lifecycle.query_states import QueryState as S
from streamctl.lifecycle.query_states import QueryTrigger as T

pytestmark = pytest.mark.quick


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


# --- the transition functions: each moves the state and sets its entry effects -------------


@dataclass
class Query:
    """The lifecycle's fields of a query (what ``QueryRow`` holds), as :func:`created` makes."""

    current_state: str = S.CREATED
    worker: str | None = None
    run: int = 0
    restarts: int = 0
    retry_at: float | None = None
    started_at: float | None = None
    error: str | None = None
    statistics: dict[str, Any] | None = None
    statistics_at: float | None = None


def test_a_new_query_is_created_with_nothing_pending():
    assert Query(**queries.created()) == Query()


CRASH_REPORTS = [
    "the query terminated with an error",
    "[USER_RAISED_EXCEPTION] malformed CSV line",
    "[CAST_INVALID_INPUT] SQLSTATE: 22018",
    f"{queries.SPARK_LOST} the agent's Spark went down",
    f"start on a1 failed: {queries.SPARK_LOST} the agent's Spark went down",
    f"{queries.SPARK_CONTAINED} took Spark down 3 times",
]

AGENTS = ["a1", "a2", "a3"]

TRIGGER_OF: dict[str, T] = {
    "start": T.START,
    "start_fresh": T.START,
    "started": T.STARTED,
    "finished": T.INPUT_DONE,
    "stopped": T.STOPPED,
    "crash": T.CRASHED,
    "agent_lost": T.AGENT_LOST,
    "stop": T.STOP,
    "move": T.MOVE,
    "rerun": T.AGENT_BACK,
    "stop_again": T.STOP_AGAIN,
    "stop_again_due": T.STOP_AGAIN,
}

operations = st.tuples(
    st.sampled_from(sorted(TRIGGER_OF)),
    st.sampled_from(AGENTS),
    st.sampled_from(CRASH_REPORTS),
    st.floats(min_value=0.0, max_value=200.0, allow_nan=False),  # time passing before it
)


def apply(
    row: Query, name: str, agent: str, error: str, now: float, policy: queries.RestartPolicy
) -> tuple[queries.Step, str | None]:
    """Run one transition function; the answer's second part is the agent a stop goes to (for
    ``stop``) or the crash's reason (for ``crash``)."""
    if name == "start":
        return queries.start(row, agent), None
    if name == "start_fresh":
        return queries.start(row, agent, fresh_budget=True), None
    if name == "started":
        return queries.started(row, now), None
    if name == "finished":
        return queries.finished(row), None
    if name == "stopped":
        return queries.stopped(row), None
    if name == "crash":
        return queries.crash(row, error, now, policy)
    if name == "agent_lost":
        return queries.agent_lost(row, now), None
    if name == "stop":
        return queries.stop(row, now)
    if name == "move":
        return queries.move(row, now), None
    if name in ("stop_again", "stop_again_due"):
        step = queries.stop_again(row, now, due=name == "stop_again_due")
        # not due yet: nothing moves (the step is the state staying where it is)
        return (step or queries.Step(S(row.current_state), S(row.current_state))), (
            "sent" if step else None
        )
    assert name == "rerun"
    return queries.rerun(row), None


def check_entry_effects(
    name: str,
    agent: str,
    error: str,
    now: float,
    policy: queries.RestartPolicy,
    before: Query,
    row: Query,
    step: queries.Step,
    extra: str | None,
) -> None:
    state = S(row.current_state)
    assert step == (S(before.current_state), state)
    assert step.action == f"{before.current_state}->{state}"
    trigger = TRIGGER_OF[name]
    if trigger is T.CRASHED:
        recovering = queries.transition(step.before, T.CRASHED)
        assert state in (recovering, queries.transition(recovering, T.GIVE_UP))
    else:
        assert state is queries.transition(step.before, trigger)
    # the run grows by one exactly when a start is sent
    assert row.run == before.run + (1 if trigger in (T.START, T.AGENT_BACK) else 0)
    # whatever holds no agent holds no worker; a start holds the agent it was placed on
    if state in (S.STOPPED, S.FINISHED, S.RECOVERING, S.FAILED):
        assert row.worker is None
    if trigger is T.START:
        assert state is S.STARTING and row.worker == agent and row.retry_at is None
    if trigger in (T.STARTED, T.AGENT_BACK):
        assert row.worker == before.worker
    if state is S.STOPPING:  # it keeps its worker until the agent confirms the stop
        assert row.worker == before.worker
        if trigger is T.STOP_AGAIN:
            # at most one stop per STOP_AGAIN_AFTER: sent once the last one is that old
            due = name == "stop_again_due" or before.retry_at is None or before.retry_at <= now
            assert (extra == "sent") is due
            if due:
                assert row.retry_at == now + queries.STOP_AGAIN_AFTER
            else:
                assert row == before
        else:
            assert extra == (row.worker if trigger is T.STOP else None)
            if trigger is T.MOVE or extra is not None:
                # a stop was just sent: the next one not before STOP_AGAIN_AFTER
                assert row.retry_at == now + queries.STOP_AGAIN_AFTER
    elif trigger is T.STOP:
        assert extra is None and row.retry_at is None
    if state is S.STOPPED:  # nothing pending: no stop to send again, no start to wait for
        assert row.retry_at is None
    if trigger is T.STARTED:
        assert row.started_at == now and row.error is None
    if state is S.RECOVERING:
        assert row.retry_at is not None and row.retry_at >= now
    if state is S.FAILED:
        assert row.retry_at is None and row.error is not None
    # restarts: a crash counts (unless lost with its Spark), a fresh budget starts from 0
    if trigger is T.CRASHED:
        assert row.error == error
        if queries.lost_with_its_spark(error):
            assert row.restarts == before.restarts
            assert state is S.FAILED or row.retry_at == now
        else:
            assert row.restarts in (1, before.restarts + 1)
        if queries.fails_on_its_input(error) or queries.contained(error):
            assert state is S.FAILED
        if state is S.RECOVERING and not queries.lost_with_its_spark(error):
            assert row.retry_at == now + policy.delay(row.restarts)
        assert extra
    elif name == "start_fresh":
        assert row.restarts == 0
    else:
        assert row.restarts == before.restarts
    if trigger is T.MOVE:
        assert row.statistics is None and row.statistics_at is None
    else:
        assert (row.statistics, row.statistics_at) == (before.statistics, before.statistics_at)
    if trigger is T.AGENT_LOST:
        assert row.retry_at == (now if state is S.RECOVERING else None)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(operations, max_size=40),
    st.integers(min_value=0, max_value=4),
    st.sampled_from(list(S)),
)
def test_random_triggers_keep_the_table_and_every_entry_effect(ops, max_restarts, first):
    policy = queries.RestartPolicy(max_restarts=max_restarts, healthy_after=60.0)
    # any state a query may be found in, as the lifecycle leaves it there
    row = Query(
        current_state=first,
        worker="a1" if first in (S.STARTING, S.RUNNING, S.STOPPING) else None,
        run=0 if first is S.CREATED else 1,
        retry_at=0.0 if first is S.RECOVERING else None,
        error="an earlier crash" if first is S.FAILED else None,
        statistics={"lag": 1.0},
        statistics_at=0.0,
    )
    now = 0.0
    for (
        name,
        agent,
        error,
        elapsed,
    ) in ops:
        now += elapsed
        before = replace(row)
        if not queries.can_transition(S(row.current_state), TRIGGER_OF[name]):
            with pytest.raises(queries.IllegalTransition):
                apply(row, name, agent, error, now, policy)
            assert row == before, "a refused transition changes nothing"
            continue
        step, extra = apply(row, name, agent, error, now, policy)
        assert row.current_state in set(S)
        check_entry_effects(name, agent, error, now, policy, before, row, step, extra)


def test_every_transition_function_refuses_what_the_table_does_not_list():
    policy = queries.RestartPolicy()
    for state, name in itertools.product(S, sorted(TRIGGER_OF)):
        row = Query(current_state=state, worker="a1", run=3, restarts=2, retry_at=5.0)
        before = replace(row)
        if queries.can_transition(state, TRIGGER_OF[name]):
            apply(row, name, "a2", "boom", 10.0, policy)
            continue
        with pytest.raises(queries.IllegalTransition, match=f"{state}.*'{TRIGGER_OF[name]}'"):
            apply(row, name, "a2", "boom", 10.0, policy)
        assert row == before


def test_crashes_back_off_then_give_up_and_a_healthy_run_resets_the_count():
    policy = queries.RestartPolicy(max_restarts=2, initial_delay=1.0, factor=2.0)
    row = Query(**queries.created())
    queries.start(row, "a1")
    queries.started(row, 0.0)
    step, reason = queries.crash(row, "boom", 10.0, policy)
    assert step.action == "RUNNING->RECOVERING"
    assert reason == "crashed on a1, restart 1 in 1.0s"
    assert (row.restarts, row.retry_at, row.worker) == (1, 11.0, None)
    queries.start(row, "a2")
    step, reason = queries.crash(row, "boom", 12.0, policy)
    assert (step.after, row.restarts, row.retry_at) == (S.RECOVERING, 2, 14.0)
    queries.start(row, "a2")
    step, reason = queries.crash(row, "boom", 15.0, policy)
    assert step.action == "STARTING->FAILED"
    assert reason == "gave up after 2 restarts"
    assert (row.restarts, row.retry_at, row.error) == (3, None, "boom")
    # a user starts it again with a fresh budget; after running healthily a crash counts as 1
    queries.start(row, "a1", fresh_budget=True)
    assert (row.restarts, row.run) == (0, 4)
    queries.started(row, 20.0)
    assert row.error is None
    queries.crash(row, "boom", 20.0 + policy.healthy_after, policy)
    assert row.restarts == 1


def test_stop_answers_the_agent_to_stop_on():
    running = Query(current_state=S.RUNNING, worker="a1", run=2)
    step, agent = queries.stop(running, 10.0)
    assert (step.action, agent, running.worker) == ("RUNNING->STOPPING", "a1", "a1")
    recovering = Query(current_state=S.RECOVERING, retry_at=3.0, run=2)
    step, agent = queries.stop(recovering, 10.0)
    assert (step.action, agent, recovering.retry_at) == ("RECOVERING->STOPPED", None, None)


def test_a_stop_is_sent_again_only_after_the_workflows_own_retries_of_it_have_ended():
    """STOP_AGAIN_AFTER outlasts every round of retrying one stop (streamctl.workflows.
    agent_calls): a stop sent again never runs beside its earlier one on a busy agent."""
    from streamctl.workflows import agent_calls

    retry = agent_calls.ACTION_RETRY
    assert retry.maximum_attempts and retry.maximum_interval is not None
    attempt = agent_calls.ACTION_PICKUP_TIMEOUT + agent_calls.ACTION_TIMEOUT
    one_round = retry.maximum_attempts * (attempt + retry.maximum_interval).total_seconds()
    rounds = agent_calls.STOP_ROUNDS
    longest = rounds * one_round + (rounds - 1) * agent_calls.STOP_RETRY_DELAY.total_seconds()
    assert longest <= queries.STOP_AGAIN_AFTER

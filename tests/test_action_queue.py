"""The agent-action queue (:mod:`streamctl.workflows.action_queue`) alone, on a plain asyncio
loop: actions that never end until told, a workflow task number the test moves."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamctl.limits import (
    MAX_ACTIONS_PER_TASK,
    MAX_ACTIONS_UNDER_WAY,
    MAX_CARRIED_WAITING_ACTIONS,
)
from streamctl.protocol.agent_contract import AgentAction, StopAssignment
from streamctl.workflows.action_queue import ActionQueue
from streamctl.workflows.run_phase import RunPhaseMachine

pytestmark = pytest.mark.quick


def stop(n: int) -> AgentAction:
    return AgentAction(f"agent-{n % 3}", stop=StopAssignment(n, 1))


class Harness:
    """An :class:`ActionQueue` whose actions run until :meth:`finish` ends them."""

    def __init__(self, configured_max: int, serve_while_draining: bool, capped: bool = True):
        self.phases = RunPhaseMachine()
        self.phases.serve_while_draining = serve_while_draining
        self.task = 1
        self.cap_asked = 0
        self.capped = capped
        self.started: list[AgentAction] = []
        self.gates: dict[int, asyncio.Event] = {}
        self.queue = ActionQueue(
            self.run, self.phases, configured_max, self.bounded, lambda: self.task
        )

    def bounded(self) -> bool:
        self.cap_asked += 1
        return self.capped

    async def run(self, action: AgentAction) -> None:
        self.started.append(action)
        assert action.stop is not None
        gate = self.gates.setdefault(action.stop.query_id, asyncio.Event())
        await gate.wait()

    async def settle(self) -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    async def finish(self, *query_ids: int) -> None:
        for query_id in query_ids:
            self.gates.setdefault(query_id, asyncio.Event()).set()
        await self.settle()

    def ids(self, actions: list[AgentAction]) -> list[int]:
        return [a.stop.query_id for a in actions if a.stop is not None]


async def test_without_serve_while_draining_actions_run_up_to_the_bound_then_wait_in_order():
    h = Harness(configured_max=2, serve_while_draining=False)
    for n in range(5):
        h.queue.start(stop(n))
    await h.settle()
    assert h.ids(h.started) == [0, 1]
    assert h.ids(h.queue.waiting) == [2, 3, 4]
    assert h.queue.room_for_starts() == 0
    assert not h.queue.to_release()  # nothing for the loop to do: ends release them
    await h.finish(0)
    assert h.ids(h.started) == [0, 1, 2]
    await h.finish(1, 2, 3)
    assert h.ids(h.started) == [0, 1, 2, 3, 4]
    assert h.ids(h.queue.carried()) == [4]
    await h.finish(4)
    assert h.queue.empty()
    assert h.queue.room_for_starts() == 2
    assert h.cap_asked == 0  # a bound below the cap never asks the patch


async def test_serving_while_draining_one_task_schedules_at_most_its_share():
    h = Harness(configured_max=MAX_ACTIONS_UNDER_WAY, serve_while_draining=True)
    total = MAX_ACTIONS_PER_TASK + 10
    for n in range(total):
        h.queue.start(stop(n))
    await h.settle()
    assert len(h.queue.under_way) == MAX_ACTIONS_PER_TASK
    assert len(h.queue.waiting) == 10
    assert h.queue.to_release()
    h.queue.release()  # the same workflow task: nothing more
    assert len(h.queue.waiting) == 10
    h.task += 5  # the next workflow task
    h.queue.release()
    await h.settle()
    assert h.queue.empty() is False and not h.queue.waiting
    assert h.ids(h.started) == list(range(total))
    assert h.ids(h.queue.carried()) == list(range(total))
    assert h.queue.descriptions()[0] == stop(0).description


async def test_a_closing_run_schedules_only_what_it_could_not_carry():
    h = Harness(configured_max=MAX_ACTIONS_UNDER_WAY, serve_while_draining=True)
    h.phases.continue_as_new_due(now=0.0, drain_timeout=1.0)
    h.phases.drained()
    assert h.phases.closing
    h.queue.waiting.extend(stop(n) for n in range(MAX_CARRIED_WAITING_ACTIONS + 3))
    assert not h.queue.to_release()
    h.queue.release()
    await h.settle()
    assert h.ids(h.started) == [0, 1, 2]
    assert len(h.queue.waiting) == MAX_CARRIED_WAITING_ACTIONS
    h.task += 1
    h.queue.release()
    assert len(h.queue.waiting) == MAX_CARRIED_WAITING_ACTIONS


async def test_an_ending_run_leaves_no_room_for_starts():
    h = Harness(configured_max=4, serve_while_draining=True)
    assert h.queue.room_for_starts() == 4
    h.queue.start(stop(1))
    assert h.queue.room_for_starts() == 3
    h.phases.continue_as_new_due(now=0.0, drain_timeout=1.0)
    assert h.queue.room_for_starts() == 0
    await h.finish(1)


@pytest.mark.parametrize(("capped", "expected"), [(True, MAX_ACTIONS_UNDER_WAY), (False, 5000)])
def test_a_bound_above_the_cap_is_capped_when_the_run_has_the_patch(capped: bool, expected: int):
    h = Harness(configured_max=5000, serve_while_draining=False, capped=capped)
    assert h.queue.max_under_way() == expected
    assert h.cap_asked == 1


@settings(max_examples=40, deadline=None)
@given(
    configured_max=st.integers(1, 6),
    serve_while_draining=st.booleans(),
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("start"), st.integers(0, 3)),
            st.tuples(st.just("finish"), st.integers(0, 30)),
            st.tuples(st.just("next_task"), st.just(0)),
        ),
        max_size=30,
    ),
)
def test_no_action_is_lost_and_the_bound_always_holds(
    configured_max: int, serve_while_draining: bool, steps: list[tuple[str, int]]
) -> None:
    async def scenario() -> None:
        h = Harness(configured_max, serve_while_draining)
        given_ids: list[int] = []
        for step, count in steps:
            if step == "start":
                for _ in range(count):
                    h.queue.start(stop(len(given_ids)))
                    given_ids.append(len(given_ids))
            elif step == "finish":
                running = h.ids(list(h.queue.under_way.values()))
                if running:
                    await h.finish(running[count % len(running)])
            else:
                h.task += 1
                if serve_while_draining:
                    h.queue.release()
            await h.settle()
            assert len(h.queue.under_way) <= configured_max
            finished = [i for i in given_ids if h.gates.get(i, asyncio.Event()).is_set()]
            carried = h.ids(h.queue.carried())
            # Every action given is finished, under way or waiting: none lost, none twice.
            assert sorted(finished + carried) == given_ids
            # Actions start in the order they were given.
            assert h.ids(h.started) == sorted(h.ids(h.started))
        await h.finish(*given_ids)

    asyncio.run(scenario())

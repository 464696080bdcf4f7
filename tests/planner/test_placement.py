"""Placement: alive agents with room, pinned sources first, spill, deterministic."""

from __future__ import annotations

import pytest

from streamctl.planner.placement import AgentSlots, Placement, count_active, place

pytestmark = pytest.mark.quick


def agent(name: str, capacity: int = 2, active: int = 0, state: str = "ALIVE", draining=False):
    return AgentSlots(name, state, capacity, draining, active)


def test_prefers_the_agent_a_physical_source_is_pinned_to():
    agents = [agent("a1"), agent("a2", capacity=8)]
    assert place(agents, pinned_to=["a1"]) == Placement("a1", local=True)
    assert place(agents) == Placement("a2", local=False)  # most free slots without locality


def test_spills_when_the_pinned_agent_is_full():
    agents = [agent("a1", capacity=1, active=1), agent("a2"), agent("a3", active=1)]
    assert place(agents, pinned_to=["a1"]) == Placement("a2", local=False)


def test_skips_dead_suspect_draining_and_excluded_agents():
    agents = [
        agent("a1", state="DEAD"),
        agent("a2", state="SUSPECT"),
        agent("a3", draining=True),
        agent("a4"),
        agent("a5"),
    ]
    assert place(agents, exclude=["a4"]) == Placement("a5", local=False)
    assert place(agents[:3]) is None


def test_ties_break_by_name_so_a_replayed_pass_places_the_same():
    agents = [agent("b"), agent("a"), agent("c")]
    assert place(agents) == place(list(reversed(agents))) == Placement("a", local=False)


def test_count_active_ignores_unassigned_queries():
    assert count_active(["a1", None, "a1", "a2"]) == {"a1": 2, "a2": 1}

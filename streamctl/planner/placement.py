"""Placing a query on an agent (DESIGN §5).

An agent can take a query when it is ``ALIVE``, not draining, and runs fewer active queries
than its capacity. Among those, the agents that the query's physical sources are pinned to come
first (locality: the data is there); when none of them has room the query spills to the others.
Within a group the agent with the most free slots wins, then the lowest name, so placement is a
pure function of the snapshot: a replayed pass places exactly as the first attempt did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streamctl.lifecycle.worker_states import AgentState


@dataclass(frozen=True)
class AgentSlots:
    """What placement needs to know about one agent."""

    name: str
    state: str
    capacity: int
    draining: bool
    active_queries: int

    @property
    def free(self) -> int:
        return self.capacity - self.active_queries

    @property
    def can_take(self) -> bool:
        return self.state == AgentState.ALIVE and not self.draining and self.free > 0


@dataclass(frozen=True)
class Placement:
    agent: str
    local: bool  # the agent holds at least one of the query's pinned physical sources


def place(
    agents: Iterable[AgentSlots],
    pinned_to: Iterable[str] = (),
    exclude: Iterable[str] = (),
) -> Placement | None:
    """The agent for a query, or ``None`` when no agent can take it now.

    ``pinned_to`` names the agents the query's physical sources are pinned to; ``exclude``
    names agents the query must leave (for example the one it just crashed on).
    """
    excluded = set(exclude)
    candidates = [a for a in agents if a.can_take and a.name not in excluded]
    if not candidates:
        return None
    pinned = set(pinned_to)
    local = [a for a in candidates if a.name in pinned]
    group = local or candidates
    best = min(group, key=lambda a: (-a.free, a.name))
    return Placement(best.name, bool(local))


def count_active(assignments: Iterable[str | None]) -> Mapping[str, int]:
    """Active queries per agent from the agents the active queries are assigned to."""
    counts: dict[str, int] = {}
    for agent in assignments:
        if agent is not None:
            counts[agent] = counts.get(agent, 0) + 1
    return counts


PIN_OPTIONS = frozenset(
    {"WORKER", "SOURCE.WORKER", "WORKER_ID", "SOURCE.WORKER_ID", "HOST", "SOURCE.HOST"}
)
"""Options that pin a physical source to a worker: ``'w1' AS WORKER``, or NebulaStream's
``'w1' AS `SOURCE`.`HOST```, which places a source on the worker that holds its data."""


def pop_pinned_worker(config: dict[str, Any]) -> str | None:
    """Remove the pinning option from a source's options and return the worker it names."""
    for key in list(config):
        if key.upper() in PIN_OPTIONS:
            value = config.pop(key)
            return None if value is None else str(value)
    return None

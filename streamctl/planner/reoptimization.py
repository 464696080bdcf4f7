"""Reoptimization: which queries to restart or move, and why (a pure function of the snapshot).

A ``Reoptimize`` request (sent by the scheduled reoptimization workflow, or by anyone) makes
the pass call :func:`decide` over the whole deployment and apply what it returns
(:mod:`streamctl.domain.reoptimize`). The decisions, in this order, each within capacity
(a target agent must be ``ALIVE``, not draining, with a free slot, counting the slots that
earlier decisions of the same call took):

1. **Restart** every ``FAILED`` query whose error is retryable (its restart policy ran out on
   crashes, not on its own input, which would fail the same way again).
2. **Move off a SUSPECT agent** every ``RUNNING`` query of an agent that missed heartbeats.
3. **Move off a lagging agent** every ``RUNNING`` query that processed less than
   :attr:`ReoptimizationPolicy.lag_ratio` of its input rate for
   :attr:`ReoptimizationPolicy.lag_intervals` statistics intervals in a row.
4. **Rebalance**: while the most loaded agent runs at least two queries more than the least
   loaded one (for example one that just joined) and that one has room, move a query between
   them. Queries local to their pinned sources stay where their data is.

Every decision carries its reason in words a person reads in ``streamctl history``, such as
"moved query 7 from a1 to a2: a1 processed 40% of its input rate for 3 intervals". The same
snapshot always gives the same decisions (ties break on names and ids), so a replayed pass
decides exactly as the first attempt did.

Lag is tracked per query by :func:`track_lag` as statistics arrive: a report whose input rate
is under :attr:`ReoptimizationPolicy.min_input_rate` says nothing about lag (an idle query
keeps up trivially) and leaves the streak as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from streamctl.lifecycle.worker_states import AgentState
from streamctl.planner.placement import AgentSlots, place

LAG_INTERVALS = "lag_intervals"
"""Statistics key: consecutive intervals in which the query processed less than its input."""
LAG_RATIO_SUM = "lag_ratio_sum"
"""Statistics key: the sum of processed/input over those intervals (their mean is the ratio a
reason reports)."""
INPUT_RATE = "input_rows_per_s"
PROCESSED_RATE = "processed_rows_per_s"


@dataclass(frozen=True)
class ReoptimizationPolicy:
    lag_ratio: float = 0.9
    """A query lags in an interval when it processed less than this share of its input rate."""
    lag_intervals: int = 3
    """Intervals in a row a query must lag before it is moved."""
    min_input_rate: float = 1.0
    """Rows/s below which an interval says nothing about lag."""


@dataclass(frozen=True)
class QueryFacts:
    """What reoptimization needs to know about one query."""

    id: int
    state: str
    agent: str | None
    error: str | None = None
    retryable: bool = True
    lag_intervals: int = 0
    lag_ratio: float = 1.0
    pinned_to: tuple[str, ...] = ()


@dataclass(frozen=True)
class Restart:
    query_id: int
    agent: str
    reason: str


@dataclass(frozen=True)
class Move:
    query_id: int
    source: str
    target: str
    reason: str


Decision = Restart | Move


def track_lag(
    previous: Mapping[str, float] | None,
    values: Mapping[str, float],
    policy: ReoptimizationPolicy = ReoptimizationPolicy(),
) -> dict[str, float]:
    """The lag streak after one statistics report: ``values`` plus the two lag keys."""
    previous = previous or {}
    intervals = previous.get(LAG_INTERVALS, 0.0)
    ratio_sum = previous.get(LAG_RATIO_SUM, 0.0)
    input_rate = values.get(INPUT_RATE, 0.0)
    if input_rate >= policy.min_input_rate:
        ratio = values.get(PROCESSED_RATE, 0.0) / input_rate
        if ratio < policy.lag_ratio:
            intervals, ratio_sum = intervals + 1, ratio_sum + ratio
        else:
            intervals, ratio_sum = 0.0, 0.0
    return {**values, LAG_INTERVALS: intervals, LAG_RATIO_SUM: ratio_sum}


def lag_of(statistics: Mapping[str, float] | None) -> tuple[int, float]:
    """The lag streak kept in a query's statistics: intervals, and the mean ratio over them."""
    if not statistics:
        return 0, 1.0
    intervals = int(statistics.get(LAG_INTERVALS, 0))
    if intervals <= 0:
        return 0, 1.0
    return intervals, statistics.get(LAG_RATIO_SUM, 0.0) / intervals


class _Load:
    """Agents' slots as decisions take and free them."""

    def __init__(self, agents: Iterable[AgentSlots]) -> None:
        self.agents = {a.name: a for a in agents}

    def slots(self) -> list[AgentSlots]:
        return sorted(self.agents.values(), key=lambda a: a.name)

    def take(self, agent: str) -> None:
        slots = self.agents[agent]
        self.agents[agent] = _with_active(slots, slots.active_queries + 1)

    def free(self, agent: str) -> None:
        slots = self.agents.get(agent)
        if slots is not None:
            self.agents[agent] = _with_active(slots, max(0, slots.active_queries - 1))

    def move(self, query_id: int, source: str, target: str, why: str) -> Move:
        """Move a query's slot from ``source`` to ``target``; the decision, with its reason."""
        self.take(target)
        self.free(source)
        return Move(
            query_id, source, target, f"moved query {query_id} from {source} to {target}: {why}"
        )


def _with_active(slots: AgentSlots, active: int) -> AgentSlots:
    return AgentSlots(slots.name, slots.state, slots.capacity, slots.draining, active)


def decide(
    agents: Iterable[AgentSlots],
    queries: Sequence[QueryFacts],
    policy: ReoptimizationPolicy = ReoptimizationPolicy(),
) -> list[Decision]:
    """The restarts and moves that make the deployment healthier now (see the module doc)."""
    load = _Load(agents)
    decisions: list[Decision] = []
    decided: set[int] = set()
    by_id = sorted(queries, key=lambda q: q.id)

    for query in by_id:
        if query.state == "FAILED" and query.retryable:
            placement = place(load.slots(), query.pinned_to)
            if placement is None:
                continue
            load.take(placement.agent)
            decided.add(query.id)
            error = f" ({query.error})" if query.error else ""
            decisions.append(
                Restart(
                    query.id,
                    placement.agent,
                    f"restarted query {query.id} on {placement.agent}: it had failed with a "
                    f"retryable error{error}",
                )
            )

    def move(query: QueryFacts, why: str) -> None:
        assert query.agent is not None
        placement = place(load.slots(), query.pinned_to, exclude=[query.agent])
        if placement is None:
            return
        decided.add(query.id)
        decisions.append(load.move(query.id, query.agent, placement.agent, why))

    running = [q for q in by_id if q.state == "RUNNING" and q.agent is not None]
    states = {a.name: a.state for a in load.slots()}
    for query in running:
        if states.get(query.agent or "") == AgentState.SUSPECT:
            move(query, f"{query.agent} is SUSPECT (it missed its heartbeats)")
    for query in running:
        if query.id not in decided and query.lag_intervals >= policy.lag_intervals:
            move(
                query,
                f"{query.agent} processed {query.lag_ratio:.0%} of its input rate for "
                f"{query.lag_intervals} intervals",
            )
    _rebalance(load, [q for q in running if q.id not in decided], decisions)
    return decisions


def _rebalance(load: _Load, movable: list[QueryFacts], decisions: list[Decision]) -> None:
    remaining = [q for q in movable if q.agent not in q.pinned_to]
    while remaining:
        usable = [a for a in load.slots() if a.state == AgentState.ALIVE and not a.draining]
        if len(usable) < 2:
            return
        busiest = max(usable, key=lambda a: (a.active_queries, a.name))
        idlest = min(usable, key=lambda a: (a.active_queries, a.name))
        if busiest.active_queries - idlest.active_queries < 2 or idlest.free <= 0:
            return
        candidates = [q for q in remaining if q.agent == busiest.name]
        if not candidates:
            return
        query = candidates[-1]  # the newest query moves; older ones keep their warm state
        remaining.remove(query)
        why = (
            f"rebalancing, {busiest.name} ran {busiest.active_queries} queries and {idlest.name} "
            f"{idlest.active_queries} of {idlest.capacity}"
        )
        decisions.append(load.move(query.id, busiest.name, idlest.name, why))

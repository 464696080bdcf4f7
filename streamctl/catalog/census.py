"""How many agents and queries the catalog holds in each state, read cheaply.

The pass activity reads this after writing its changes, inside its own transaction, so the
counts are those of the snapshot version it commits; the metrics endpoint reads it per scrape.
It costs two ``GROUP BY`` statements: the queries' ``current_state`` column is indexed, and the
workers table holds one row per agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, func, select
from sqlalchemy.orm import Session

from streamctl.catalog.models import Query, Worker


@dataclass(frozen=True)
class Census:
    """``agents[state]`` and ``queries[current_state]``; a state with none is absent."""

    agents: dict[str, int] = field(default_factory=dict)
    queries: dict[str, int] = field(default_factory=dict)


def take_census(session: Session | Connection) -> Census:
    """The counts as ``session`` sees them (the pass's transaction, or a scrape's connection)."""
    agents = session.execute(select(Worker.state, func.count()).group_by(Worker.state))
    queries = session.execute(
        select(Query.current_state, func.count()).group_by(Query.current_state)
    )
    return Census(
        agents={str(state): int(count) for state, count in agents},
        queries={str(state): int(count) for state, count in queries},
    )

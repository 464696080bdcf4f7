"""The lifecycle of a worker (a Spark agent), with every allowed transition in one place.

States
------
``ALIVE``        registered and heard from within ``suspect_after`` seconds.
``SUSPECT``      no heartbeat for ``suspect_after`` seconds; still owns its queries.
``DEAD``         no heartbeat for ``dead_after`` seconds; its queries are re-placed.
``UNREGISTERED`` the agent said goodbye (kept so pinned physical sources keep their worker), or
                 it was declared (``CREATE WORKER``) and its agent has not registered yet.

Transitions happen on messages (``RegisterWorker``, ``Heartbeat``, ``UnregisterWorker``, the
statement ``CREATE WORKER``) and on
the heartbeat age the coordinator evaluates when its liveness timer fires. A transition not in
:data:`TRANSITIONS` raises :class:`IllegalTransition`; nothing is silently overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class AgentState(StrEnum):
    ALIVE = "ALIVE"
    SUSPECT = "SUSPECT"
    DEAD = "DEAD"
    UNREGISTERED = "UNREGISTERED"


class AgentTrigger(StrEnum):
    DECLARE = "declare"
    REGISTER = "register"
    HEARTBEAT = "heartbeat"
    MISSED_HEARTBEATS = "missed_heartbeats"
    TIMED_OUT = "timed_out"
    UNREGISTER = "unregister"


TRANSITIONS: dict[tuple[AgentState | None, AgentTrigger], AgentState] = {
    (None, AgentTrigger.DECLARE): AgentState.UNREGISTERED,
    (None, AgentTrigger.REGISTER): AgentState.ALIVE,
    (AgentState.ALIVE, AgentTrigger.REGISTER): AgentState.ALIVE,
    (AgentState.SUSPECT, AgentTrigger.REGISTER): AgentState.ALIVE,
    (AgentState.DEAD, AgentTrigger.REGISTER): AgentState.ALIVE,
    (AgentState.UNREGISTERED, AgentTrigger.REGISTER): AgentState.ALIVE,
    (AgentState.ALIVE, AgentTrigger.HEARTBEAT): AgentState.ALIVE,
    (AgentState.SUSPECT, AgentTrigger.HEARTBEAT): AgentState.ALIVE,
    (AgentState.ALIVE, AgentTrigger.MISSED_HEARTBEATS): AgentState.SUSPECT,
    (AgentState.ALIVE, AgentTrigger.TIMED_OUT): AgentState.DEAD,
    (AgentState.SUSPECT, AgentTrigger.TIMED_OUT): AgentState.DEAD,
    (AgentState.ALIVE, AgentTrigger.UNREGISTER): AgentState.UNREGISTERED,
    (AgentState.SUSPECT, AgentTrigger.UNREGISTER): AgentState.UNREGISTERED,
    (AgentState.DEAD, AgentTrigger.UNREGISTER): AgentState.UNREGISTERED,
}
"""Every allowed transition. A heartbeat from a DEAD or UNREGISTERED agent is not one. The pass
treats a heartbeat from a DEAD agent as a registration (it was alive after all, and the
coordinator reconciles what it runs) and ignores one from an UNREGISTERED agent."""


class IllegalTransition(Exception):
    def __init__(self, state: AgentState | None, trigger: AgentTrigger) -> None:
        super().__init__(f"agent in state {state or 'unknown'} cannot take '{trigger}'")
        self.state = state
        self.trigger = trigger


def transition(state: AgentState | None, trigger: AgentTrigger) -> AgentState:
    try:
        return TRANSITIONS[(state, trigger)]
    except KeyError:
        raise IllegalTransition(state, trigger) from None


def can_transition(state: AgentState | None, trigger: AgentTrigger) -> bool:
    return (state, trigger) in TRANSITIONS


@dataclass(frozen=True)
class LivenessPolicy:
    """Heartbeat ages (seconds) after which an agent becomes SUSPECT and then DEAD."""

    suspect_after: float = 10.0
    dead_after: float = 30.0

    def trigger_for_age(self, age: float) -> AgentTrigger | None:
        if age >= self.dead_after:
            return AgentTrigger.TIMED_OUT
        if age >= self.suspect_after:
            return AgentTrigger.MISSED_HEARTBEATS
        return None

    def next_deadline(self, state: AgentState, last_heartbeat_at: float) -> float | None:
        """When this agent's state next changes if no heartbeat arrives."""
        if state is AgentState.ALIVE:
            return last_heartbeat_at + self.suspect_after
        if state is AgentState.SUSPECT:
            return last_heartbeat_at + self.dead_after
        return None

"""What every handler of a pass works with: the catalog view, the policies, and what the
current message changed (for the changelog) or asked agents to do (actions)."""

from __future__ import annotations

from dataclasses import dataclass, field

from streamctl.catalog.rows import EntityRow
from streamctl.catalog.view import CatalogView
from streamctl.compact_json import dumps_bytes
from streamctl.lifecycle.agents import LivenessPolicy
from streamctl.lifecycle.queries import RestartPolicy
from streamctl.limits import MAX_PASS_ACTION_BYTES
from streamctl.workflows.actions import AgentAction


class RequestFailed(Exception):
    """A request refused with an error code; raised before the catalog was changed."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Change:
    entity: str
    key: str
    action: str
    reason: str


@dataclass
class PassContext:
    """The view plus what the current message changed and which agent actions it decided.

    ``changes`` is cleared before each message (the changelog names the message); ``actions``
    accumulate over the whole pass and leave with its result."""

    view: CatalogView
    liveness: LivenessPolicy
    restarts: RestartPolicy = field(default_factory=RestartPolicy)
    changes: list[Change] = field(default_factory=list)
    actions: list[AgentAction] = field(default_factory=list)
    action_bytes: int = 0
    """The encoded size of the start actions so far: the plans they carry are most of it."""
    more_to_start: bool = False
    """Queries were left waiting because this pass's start actions reached their bound; the
    pass asks the workflow for another one at once."""
    start_room: int | None = None
    """How many start actions the workflow takes from this pass (``PassInput.action_room``);
    queries past it wait for the passes its running actions' outcomes bring."""
    starts: int = 0

    def add_action(self, action: AgentAction) -> None:
        self.actions.append(action)
        if action.start is not None:
            self.action_bytes += len(dumps_bytes(action.start))
            self.starts += 1

    def can_start_more(self) -> bool:
        """Whether another start action fits this pass's result and the workflow's room."""
        if self.start_room is not None and self.starts >= self.start_room:
            return False
        if self.action_bytes < MAX_PASS_ACTION_BYTES:
            return True
        self.more_to_start = True
        return False

    def record(self, entity: str, key: object, action: str, reason: str) -> None:
        self.changes.append(Change(entity, str(key), action, reason))

    def stamp(self, row: EntityRow) -> None:
        """Mark ``row`` as changed by this pass's snapshot version."""
        row.updated_version = self.view.version

"""What every handler of a pass works with: the catalog view, the policies, and what the
current message changed (for the changelog) or asked agents to do (actions); and the two
shapes a handler has (:data:`RequestHandler`, :data:`EventHandler`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamctl.catalog.rows import EntityRow, QueryRow
from streamctl.catalog.view import CatalogView
from streamctl.compact_json import dumps_bytes
from streamctl.lifecycle.query_states import ACTIVE_STATES, RestartPolicy
from streamctl.lifecycle.worker_states import LivenessPolicy
from streamctl.limits import MAX_PASS_ACTION_BYTES, MAX_STARTS_PER_PASS
from streamctl.protocol.agent_contract import AgentAction


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
    _active_view: CatalogView | None = field(default=None, repr=False)
    _active: dict[str, int] = field(default_factory=dict, repr=False)
    _counted: dict[int, str] = field(default_factory=dict, repr=False)
    """:meth:`active_by_agent`'s counts, the view they were counted on, and the agent each
    active query is counted on."""
    start_room: int | None = None
    """How many start actions the workflow takes from this pass (``PassInput.action_room``);
    queries past it wait for the passes its running actions' outcomes bring."""
    starts: int = 0
    left_without_room: bool = False
    """Queries were left waiting because the workflow had no more room for starts
    (``start_room``); the outcomes of its actions under way bring the next pass."""

    def add_action(self, action: AgentAction) -> None:
        self.actions.append(action)
        if action.start is not None:
            self.action_bytes += len(dumps_bytes(action.start))
            self.starts += 1

    def can_start_more(self) -> bool:
        """Whether another start action fits this pass's result and the workflow's room."""
        if self.start_room is not None and self.starts >= self.start_room:
            self.left_without_room = True
            return False
        if self.action_bytes < MAX_PASS_ACTION_BYTES and self.starts < MAX_STARTS_PER_PASS:
            return True
        self.more_to_start = True
        return False

    def record(self, entity: str, key: object, action: str, reason: str) -> None:
        self.changes.append(Change(entity, str(key), action, reason))

    def stamp(self, row: EntityRow) -> None:
        """Mark ``row`` as changed by this pass's snapshot version."""
        row.updated_version = self.view.version
        if isinstance(row, QueryRow) and self._active_view is self.view:
            self._count_active(row)

    def active_by_agent(self) -> Mapping[str, int]:
        """Active queries (:data:`ACTIVE_STATES`) per agent, as this pass has left them.

        Counted once per view and then kept up to date by :meth:`stamp` (every transition of
        a query is stamped), so placing a thousand queries in one pass does not count ten
        thousand active ones a thousand times (a failover in ``bench scale``)."""
        if self._active_view is not self.view:  # the first use, or the view was read again
            self._active = {}
            self._counted = {}
            self._active_view = self.view
            for row in self.view.queries_in_states(ACTIVE_STATES):
                self._count_active(row)
        return self._active

    def dropped(self, row: QueryRow) -> None:
        """``row`` left the catalog in this pass: it no longer takes a slot."""
        if self._active_view is self.view:
            self._count_active(row, present=False)

    def _count_active(self, row: QueryRow, *, present: bool = True) -> None:
        counted = self._counted.pop(row.id, None)
        if counted is not None:
            self._active[counted] -= 1
        if present and row.current_state in ACTIVE_STATES and row.worker is not None:
            self._counted[row.id] = row.worker
            self._active[row.worker] = self._active.get(row.worker, 0) + 1


RequestHandler = Callable[[PassContext, Any], Any]
"""Applies one request: returns its result (plain JSON) and records its changes in the
changelog, or raises :class:`RequestFailed` *before* changing anything, so a refused request
leaves the catalog as it was."""
EventHandler = Callable[[PassContext, Any, float], None]
"""Applies one event received at the given time (seconds since the epoch); answers nothing."""

"""The contract between the coordinator workflow and the pass activity.

The workflow sends a :class:`PassInput` (its pass number, its clock and the batch in arrival
order); the activity answers a :class:`PassResult` after committing one catalog transaction.
A pass number is applied at most once per workflow id: a retried activity with a pass number
the catalog already holds gets the stored answers back (``replayed``) and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamctl.workflows.messages import Envelope, Response


@dataclass(frozen=True)
class PendingMessage:
    """A message in the workflow's buffer: the envelope, when it arrived, request or event."""

    envelope: Envelope
    received_at: float
    is_request: bool
    size: int = 0


@dataclass(frozen=True)
class PassInput:
    workflow_id: str
    pass_no: int
    now: float
    messages: list[PendingMessage]
    suspect_after: float
    dead_after: float


@dataclass(frozen=True)
class PassResult:
    version: int
    responses: list[Response]
    next_liveness_deadline: float | None
    changes: int
    replayed: bool = False


@dataclass(frozen=True)
class CatalogPosition:
    """Where a workflow id stands in the catalog: its last pass and the newest version."""

    version: int
    last_pass_no: int

"""Test helpers that read a catalog back: dumps, history checks and one-by-one replay."""

from __future__ import annotations

import itertools
import json
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from streamctl.activities.pass_activity import CatalogWork
from streamctl.catalog.models import (
    ChangelogEntry,
    LogicalSource,
    PhysicalSource,
    Sink,
    SnapshotVersion,
    StoredResponse,
    Worker,
)
from streamctl.catalog.store import create_catalog_engine
from streamctl.protocol.messages import Envelope, Response
from streamctl.protocol.pass_io import PassInput, request_batches_json


def dump(url: str) -> dict[str, Any]:
    """The catalog's entities without version columns (which differ between histories)."""
    engine = create_catalog_engine(url)
    try:
        with Session(engine) as session:
            return {
                "logical": sorted(
                    (row.name, repr(row.schema)) for row in session.scalars(select(LogicalSource))
                ),
                "physical": sorted(
                    (row.id, row.logical_source, row.type, repr(row.config), row.worker)
                    for row in session.scalars(select(PhysicalSource))
                ),
                "sinks": sorted(
                    (row.name, row.type, repr(row.schema), repr(row.config))
                    for row in session.scalars(select(Sink))
                ),
            }
    finally:
        engine.dispose()


def worker_values(url: str, column: str) -> dict[str, Any]:
    """Each worker's ``column`` (``capacity``, ``heartbeats`` ...), by name."""
    engine = create_catalog_engine(url)
    try:
        with Session(engine) as session:
            return {row.name: getattr(row, column) for row in session.scalars(select(Worker))}
    finally:
        engine.dispose()


def applied_requests(url: str) -> list[StoredResponse]:
    """Every stored response in the order the coordinator applied the requests."""
    engine = create_catalog_engine(url)
    try:
        with Session(engine) as session:
            rows = list(
                session.scalars(
                    select(StoredResponse).order_by(StoredResponse.version, StoredResponse.seq)
                )
            )
            session.expunge_all()
            return rows
    finally:
        engine.dispose()


def _comparable(result: Any) -> Any:
    if isinstance(result, dict):
        return {k: _comparable(v) for k, v in result.items() if k != "created_version"}
    if isinstance(result, list):
        return [_comparable(v) for v in result]
    return result


def replay_one_by_one(source_url: str, target_url: str) -> list[str]:
    """Apply the recorded requests one per pass to a fresh catalog; return mismatches."""
    mismatches: list[str] = []
    activities = CatalogWork(target_url)
    for pass_no, row in enumerate(applied_requests(source_url), start=1):
        request = row.request
        envelope = Envelope(
            id=row.request_id, kind=request["kind"], body=request["body"], v=request["v"]
        )
        result = activities.apply_pass(
            PassInput("replay", pass_no, 0.0, [], [0.0], 10.0, 30.0),
            request_batches_json([[envelope]]),
        )
        replayed = Response(**json.loads(result.responses[0])[0])
        if (replayed.ok, replayed.error_code, _comparable(replayed.result)) != (
            row.ok,
            row.error_code,
            _comparable(row.result),
        ):
            mismatches.append(
                f"{row.request_id} {row.kind}: recorded {row.ok} {row.error_code} {row.result!r}, "
                f"replayed {replayed.ok} {replayed.error_code} {replayed.result!r}"
            )
    return mismatches


def catalog_invariants(url: str) -> dict[str, Any]:
    """Versions strictly increase with pass numbers; no message changed an entity twice."""
    engine = create_catalog_engine(url)
    try:
        with Session(engine) as session:
            passes = list(
                session.execute(
                    select(SnapshotVersion.pass_no, SnapshotVersion.version).order_by(
                        SnapshotVersion.version
                    )
                )
            )
            doubled = list(
                session.execute(
                    select(
                        ChangelogEntry.message_id,
                        ChangelogEntry.entity,
                        ChangelogEntry.key,
                        ChangelogEntry.action,
                        func.count(),
                    )
                    .group_by(
                        ChangelogEntry.message_id,
                        ChangelogEntry.entity,
                        ChangelogEntry.key,
                        ChangelogEntry.action,
                    )
                    .having(func.count() > 1)
                )
            )
            responses = session.scalar(select(func.count()).select_from(StoredResponse))
    finally:
        engine.dispose()
    pass_numbers = [p for p, _ in passes]
    return {
        "versions_increase_with_passes": all(a < b for a, b in itertools.pairwise(pass_numbers)),
        "applied_twice": doubled,
        "responses": responses,
        "passes": len(passes),
    }


async def failed_workflow_tasks(handle: WorkflowHandle[Any, Any]) -> int:
    """How many workflow tasks failed across every run of this workflow id."""
    failures = 0
    client = handle._client
    async for execution in client.list_workflows(f"WorkflowId = '{handle.id}'"):
        history = await client.get_workflow_handle(
            handle.id, run_id=execution.run_id
        ).fetch_history()
        failures += sum(
            1
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        )
    return failures

"""The catalog activities the coordinator workflow runs: thin Temporal adapters.

Each activity decodes what Temporal hands it, calls the pass's domain logic
(:mod:`streamctl.domain.passes`, :mod:`streamctl.domain.quarantine`) against the catalog at
``catalog_url``, and hands the result back. The workflow calls them by reference
(``CatalogActivities.apply_pass``); their names are part of recorded histories and never change.

* ``catalog_position(workflow_id) -> CatalogPosition``: the newest snapshot version and the
  last pass this workflow committed (where a new run picks up).
* ``apply_pass(PassInput, requests) -> PassResult``: one pass, one catalog transaction
  (:func:`streamctl.domain.passes.apply_pass` states the order of work). A catalog that cannot
  be reached fails the attempt with ``CATALOG_UNAVAILABLE``: the workflow retries that pass
  rather than splitting it to find a message to blame.
* ``quarantine_message(QuarantineInput) -> None``: keep a message that fails its pass even
  alone, and store its request's answer (idempotent).

The activities are ``async``: each hands its work (:class:`CatalogWork`, which holds nothing but
the URL and so pickles) to the worker's executor (a process pool in
:func:`streamctl.worker.coordinator_worker.run_coordinator_worker`, so a pass runs beside the
workflow
tasks instead of sharing their interpreter lock) and awaits it. A synchronous activity on a
process pool would cost more than the pass itself (~10 ms per activity here: the SDK creates
cancellation events and a heartbeat queue in a multiprocessing manager process, and the pool
process connects to that manager for each of them); the pass neither heartbeats nor watches
for cancellation, so a plain call into the pool is all it needs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TypeVar

from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from streamctl.catalog.store import catalog_engine
from streamctl.domain import passes, quarantine
from streamctl.domain.isolation import is_transient
from streamctl.domain.pass_requests import request_batches
from streamctl.protocol import refusals
from streamctl.protocol.pass_io import (
    CatalogPosition,
    PassInput,
    PassResult,
    QuarantineInput,
)

T = TypeVar("T")


@dataclass(frozen=True)
class CatalogUnreachable:
    """A pass whose catalog could not be reached, as the work hands it back (an exception
    would cross the process boundary by pickling)."""

    reason: str


@dataclass(frozen=True)
class CatalogWork:
    """What the catalog activities do, synchronously, against the catalog at ``catalog_url``
    (the engine is per process: :func:`~streamctl.catalog.store.catalog_engine`)."""

    catalog_url: str

    def position(self, workflow_id: str) -> CatalogPosition:
        return passes.catalog_position(catalog_engine(self.catalog_url), workflow_id)

    def apply_pass(self, pass_input: PassInput, requests: bytes) -> PassResult | CatalogUnreachable:
        """One pass; ``requests`` is the JSON array of request batches
        (:mod:`streamctl.protocol.pass_io`)."""
        batches = request_batches(
            requests, pass_input.request_batch_arrivals, pass_input.request_batch_seqs
        )
        try:
            return passes.apply_pass(catalog_engine(self.catalog_url), pass_input, batches)
        except Exception as error:
            if is_transient(error):
                return CatalogUnreachable(f"{type(error).__name__}: {error}")
            raise

    def set_aside(self, item: QuarantineInput) -> None:
        quarantine.set_aside(catalog_engine(self.catalog_url), item)


class CatalogActivities:
    """The catalog activities: ``work`` run on ``executor``."""

    def __init__(self, work: CatalogWork, executor: Executor) -> None:
        self.work = work
        self.executor = executor

    async def _run(self, call: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, call, *args)

    @activity.defn(name="catalog_position")
    async def catalog_position(self, workflow_id: str) -> CatalogPosition:
        return await self._run(self.work.position, workflow_id)

    @activity.defn(name="apply_pass")
    async def apply_pass(self, pass_input: PassInput, requests: RawValue) -> PassResult:
        outcome = await self._run(self.work.apply_pass, pass_input, requests.payload.data)
        if isinstance(outcome, CatalogUnreachable):
            # Not a message's fault: the workflow tries this pass again rather than
            # splitting it to find a message that fails it.
            raise ApplicationError(
                f"the catalog cannot be reached: {outcome.reason}",
                type=refusals.CATALOG_UNAVAILABLE,
            )
        return outcome

    @activity.defn(name="quarantine_message")
    async def quarantine_message(self, item: QuarantineInput) -> None:
        await self._run(self.work.set_aside, item)

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
"""

from __future__ import annotations

from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from streamctl.catalog.store import catalog_engine
from streamctl.domain import passes, quarantine
from streamctl.domain.isolation import is_transient
from streamctl.domain.pass_requests import request_batches
from streamctl.workflows.passes import (
    CATALOG_UNAVAILABLE,
    CatalogPosition,
    PassInput,
    PassResult,
    QuarantineInput,
)


class CatalogActivities:
    """Activities that read or write the catalog at ``catalog_url``."""

    def __init__(self, catalog_url: str) -> None:
        self.catalog_url = catalog_url

    @activity.defn(name="catalog_position")
    def catalog_position(self, workflow_id: str) -> CatalogPosition:
        return passes.catalog_position(catalog_engine(self.catalog_url), workflow_id)

    @activity.defn(name="apply_pass")
    def apply_pass(self, pass_input: PassInput, requests: RawValue) -> PassResult:
        batches = request_batches(requests.payload.data, pass_input.request_batch_arrivals)
        try:
            return passes.apply_pass(catalog_engine(self.catalog_url), pass_input, batches)
        except Exception as error:
            if is_transient(error):
                # Not a message's fault: the workflow tries this pass again rather than
                # splitting it to find a message that fails it.
                raise ApplicationError(
                    f"the catalog cannot be reached: {type(error).__name__}: {error}",
                    type=CATALOG_UNAVAILABLE,
                ) from error
            raise

    @activity.defn(name="quarantine_message")
    def quarantine_message(self, item: QuarantineInput) -> None:
        quarantine.set_aside(catalog_engine(self.catalog_url), item)

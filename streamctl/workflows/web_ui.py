"""What the coordinator workflow shows in the Temporal Web UI, and what that costs.

* **Search attributes** (:data:`SEARCH_ATTRIBUTES`): the snapshot version, alive agents,
  running and failed queries, so ``StreamctlFailedQueries > 0`` finds a coordinator in trouble
  from the workflow list. The counts are ``Int``; the version is a ``Double`` (exact for any
  version below 2**53) because SQL visibility stores at most 3 ``Int`` attributes per namespace
  (the dev server refuses to start with a fourth). Each upsert is one history event and the
  run continues as new at ``max_history_events``, so :class:`WebUiView` upserts only the
  values that changed since the last upsert (or since the run started: continue-as-new
  carries the values over).
  An upsert of an attribute the namespace does not know fails the workflow task, so the
  workflow upserts only when its configuration says they are registered
  (``CoordinatorConfig.search_attributes``, set by
  :func:`streamctl.worker.coordinator_worker.ensure_coordinator` after checking, or registering,
  them
  through the operator service).
* **Memo** (:func:`config_memo`): the coordinator's knobs and the catalog's kind (never its URL,
  which may hold credentials), given when the workflow starts and again to every
  continue-as-new, so it always describes the run's configuration. It costs no event.
* **Current details** (:func:`pass_details`): Markdown set after every pass (the latest pass,
  its duration and size, the snapshot version, pending work, actions under way, the run). The
  SDK sends it with the workflow task's completion and the UI reads it through a query: no
  event either.
* **Summaries**: every activity is scheduled with a one-line summary (the pass's size, the
  agent action's :attr:`~streamctl.protocol.agent_contract.AgentAction.description`), and the
  workflow starts with a static summary and details (:func:`static_summary`,
  :func:`static_details`).

Replay safety: only the upserts are workflow commands. A run started before this code has no
``search_attributes`` flag in its configuration, so replaying it with this code emits no
upsert it did not emit before; the memo rides on the continue-as-new command, whose attributes
replay does not compare. No ``workflow.patched`` marker is needed.

Everything here is deterministic: it reads only its arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio.common import SearchAttributeKey, SearchAttributeUpdate, TypedSearchAttributes

if TYPE_CHECKING:
    from streamctl.protocol.coordinator_config import CoordinatorConfig
SNAPSHOT_VERSION = SearchAttributeKey.for_float("StreamctlSnapshotVersion")
ALIVE_AGENTS = SearchAttributeKey.for_int("StreamctlAliveAgents")
RUNNING_QUERIES = SearchAttributeKey.for_int("StreamctlRunningQueries")
FAILED_QUERIES = SearchAttributeKey.for_int("StreamctlFailedQueries")
SEARCH_ATTRIBUTES: tuple[SearchAttributeKey[int] | SearchAttributeKey[float], ...] = (
    SNAPSHOT_VERSION,
    ALIVE_AGENTS,
    RUNNING_QUERIES,
    FAILED_QUERIES,
)
"""The coordinator's custom search attributes (``--search-attribute Name=Type`` on a dev server)."""

MEMO_KEY = "config"
STATIC_SUMMARY = "streamctl coordinator"


def config_memo(config: CoordinatorConfig) -> dict[str, Any]:
    """The memo: the knobs a user sets and the catalog's kind, nothing secret."""
    return {
        MEMO_KEY: {
            "batch_size": config.batch_size,
            "timeout": config.timeout,
            "catalog": config.catalog_kind or "unknown",
            "max_pending": config.max_pending,
            "passes_per_run": config.passes_per_run,
            "max_history_events": config.max_history_events,
            "search_attributes": config.search_attributes,
        }
    }


def pass_summary(pass_no: int, requests: int, events: int) -> str:
    """The pass activity's summary in the event history."""
    return f"pass {pass_no}: {_count(requests, 'request')}, {_count(events, 'event')}"


def static_summary(workflow_id: str) -> str:
    return f"{STATIC_SUMMARY} `{workflow_id}`"


def static_details(config: CoordinatorConfig) -> str:
    return (
        f"Runs a catalog pass every **{config.batch_size}** messages or "
        f"**{config.timeout * 1000:g} ms** after the oldest pending one; "
        f"catalog: **{config.catalog_kind or 'unknown'}**. "
        "The current details show the latest pass."
    )


@dataclass(frozen=True)
class PassFacts:
    """What :func:`pass_details` reports about one pass and the coordinator after it."""

    pass_no: int
    duration_ms: float
    requests: int
    events: int
    changes: int
    version: int
    pending_requests: int
    pending_events: int
    actions: Sequence[str]
    run: int
    passes_this_run: int
    agents_by_state: Mapping[str, int]
    queries_by_state: Mapping[str, int]


MAX_ACTIONS_LISTED = 5


def pass_details(facts: PassFacts) -> str:
    """The current details: Markdown the Web UI renders under "User Metadata"."""
    agents = _states(facts.agents_by_state) or "none registered"
    queries = _states(facts.queries_by_state) or "none"
    lines = [
        f"**Pass {facts.pass_no}** took {facts.duration_ms:.0f} ms: "
        f"{_count(facts.requests, 'request')}, {_count(facts.events, 'event')}, "
        f"{_count(facts.changes, 'change')}",
        "",
        f"* snapshot version **{facts.version}**",
        f"* pending: {_count(facts.pending_requests, 'request')}, "
        f"{_count(facts.pending_events, 'event')}",
        f"* actions under way: {len(facts.actions)}",
    ]
    lines += [f"  * {action}" for action in facts.actions[:MAX_ACTIONS_LISTED]]
    if len(facts.actions) > MAX_ACTIONS_LISTED:
        lines.append(f"  * and {len(facts.actions) - MAX_ACTIONS_LISTED} more")
    lines += [
        f"* agents: {agents}",
        f"* queries: {queries}",
        f"* run {facts.run} (continue-as-new), pass {facts.passes_this_run} of this run",
    ]
    return "\n".join(lines)


def waiting_details(version: int, run: int) -> str:
    """The current details before a run's first pass."""
    return f"Waiting for messages: snapshot version **{version}**, run {run} (continue-as-new)"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _states(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{count} {state}" for state, count in sorted(counts.items()) if count)


class WebUiView:
    """The search attribute values last upserted, to upsert only what changed."""

    def __init__(self, current: TypedSearchAttributes) -> None:
        self.shown: dict[str, float | None] = {
            key.name: current.get(key) for key in SEARCH_ATTRIBUTES
        }

    def updates(
        self, version: int, agents_by_state: Mapping[str, int], queries_by_state: Mapping[str, int]
    ) -> list[SearchAttributeUpdate[Any]]:
        """The upserts that bring the attributes to these values (none if all are current);
        they count as shown from now on."""
        changed: list[SearchAttributeUpdate[Any]] = []
        if self._changed(SNAPSHOT_VERSION, version):
            changed.append(SNAPSHOT_VERSION.value_set(float(version)))
        for key, count in (
            (ALIVE_AGENTS, agents_by_state.get("ALIVE", 0)),
            (RUNNING_QUERIES, queries_by_state.get("RUNNING", 0)),
            (FAILED_QUERIES, queries_by_state.get("FAILED", 0)),
        ):
            if self._changed(key, count):
                changed.append(key.value_set(count))
        return changed

    def _changed(self, key: SearchAttributeKey[Any], value: float) -> bool:
        if self.shown[key.name] == value:
            return False
        self.shown[key.name] = value
        return True

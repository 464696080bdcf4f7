"""Recorded coordinator histories replay against the current workflow code.

Every file in ``tests/histories/`` is the history of one workflow run recorded from an earlier
commit (``scripts/record_histories.py``; the file name starts with that commit). Temporal's
``Replayer`` runs the current ``CoordinatorWorkflow`` and ``ReoptimizationWorkflow`` code
against each: a change that makes the code issue different commands for the same history (a
new timer or activity, a different order, a removed step) raises a ``NondeterminismError``
here, which in production would wedge a running coordinator after a worker upgrade. Such a
change must be guarded with ``workflow.patched()`` or wait for the run boundary (README,
"Upgrading a running coordinator").

The replay uses the workers' own data converter (:func:`streamctl.workflows.wire.data_converter`:
compression and payload encryption) with the fixed test key the histories were recorded
with (``tests/histories/payload.key``). Replaying needs no Temporal server: it takes about a
second for all files.

The last tests show that the harness does detect non-determinism: a history replayed against
a deliberately changed copy of the workflow fails, and a change behind ``workflow.patched()``
replays.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from streamctl.config import parse_payload_keys
from streamctl.workflows.coordinator import CoordinatorWorkflow
from streamctl.workflows.reoptimize_workflow import ReoptimizationWorkflow
from streamctl.workflows.state import CoordinatorInput
from streamctl.workflows.wire import data_converter

pytestmark = pytest.mark.quick

HISTORIES = Path(__file__).parent / "histories"
HISTORY_FILES = sorted(HISTORIES.glob("*.json"))
TEST_KEYS = parse_payload_keys((HISTORIES / "payload.key").read_text().strip(), "payload.key")


def load(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def replayer(*workflows: type) -> Replayer:
    return Replayer(
        workflows=list(workflows) or [CoordinatorWorkflow, ReoptimizationWorkflow],
        data_converter=data_converter(TEST_KEYS),
    )


def test_there_are_histories_of_every_kind() -> None:
    names = [path.name for path in HISTORY_FILES]
    for covers in ("requests", "events", "malformed", "agent-actions", "reoptimization"):
        assert any(f"-{covers}" in name for name in names), (covers, names)
    assert sum("continue-as-new-run" in name for name in names) >= 2, names
    for path in HISTORY_FILES:
        assert path.stat().st_size < 1_000_000, f"{path.name}: keep histories under 1 MB"


@pytest.mark.parametrize("path", HISTORY_FILES, ids=lambda path: path.stem)
async def test_history_replays(path: Path) -> None:
    # Raises (NondeterminismError, or the workflow task's failure) when the current code
    # cannot continue this history.
    result = await replayer().replay_workflow(load(path))
    assert result.replay_failure is None


# --- the harness catches non-determinism -----------------------------------------------------

ANY_COORDINATOR_HISTORY = HISTORIES / "f29f918-requests.json"


@workflow.defn(name="Coordinator")
class CoordinatorWithExtraTimer(CoordinatorWorkflow):
    """A careless change: the loop now sleeps before it starts."""

    @workflow.run
    async def run(self, workflow_input: CoordinatorInput) -> None:
        await workflow.sleep(timedelta(milliseconds=1))
        await super().run(workflow_input)


@workflow.defn(name="Coordinator")
class CoordinatorWithExtraActivity(CoordinatorWorkflow):
    """A careless change: every pass first asks the catalog for its position."""

    @workflow.run
    async def run(self, workflow_input: CoordinatorInput) -> None:
        await super().run(workflow_input)

    async def _run_pass(self) -> None:
        await workflow.execute_activity(
            "catalog_position",
            workflow.info().workflow_id,
            start_to_close_timeout=timedelta(seconds=5),
        )
        await super()._run_pass()


@workflow.defn(name="Coordinator")
class CoordinatorWithPatchedTimer(CoordinatorWorkflow):
    """The same kind of change done right, at the run boundary (README, "Upgrading a running
    coordinator"): decided once at the top of ``run()`` with ``workflow.patched()``, so a run
    recorded before the change keeps the old behaviour and every new run gets the new one."""

    @workflow.run
    async def run(self, workflow_input: CoordinatorInput) -> None:
        self.sleep_before_passes = workflow.patched("sleep-before-passes")
        await super().run(workflow_input)

    async def _run_pass(self) -> None:
        if self.sleep_before_passes:
            await workflow.sleep(timedelta(milliseconds=1))
        await super()._run_pass()


@pytest.mark.parametrize("changed", [CoordinatorWithExtraTimer, CoordinatorWithExtraActivity])
async def test_a_non_deterministic_change_fails_the_replay(changed: type[Any]) -> None:
    history = load(ANY_COORDINATOR_HISTORY)
    with pytest.raises(workflow.NondeterminismError):
        await replayer(changed, ReoptimizationWorkflow).replay_workflow(history)


async def test_a_change_behind_workflow_patched_replays() -> None:
    history = load(ANY_COORDINATOR_HISTORY)
    result = await replayer(CoordinatorWithPatchedTimer, ReoptimizationWorkflow).replay_workflow(
        history
    )
    assert result.replay_failure is None

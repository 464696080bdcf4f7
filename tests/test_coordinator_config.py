"""The coordinator's configuration
(:class:`~streamctl.protocol.coordinator_config.CoordinatorConfig`).

* Property (isolated logic): ``problems()`` names exactly the knobs that break the rules as
  stated here independently (counts are integers of at least 1, ``max_restarts`` of at least
  0, ``max_actions_under_way`` at most 1,000, below Temporal's 2,000 pending activities;
  durations finite seconds within their bounds, three of them at least a millisecond, the
  resolution of Temporal's timeouts), and ``usable()``
  keeps every good knob and puts each bad one at its default, so it has no problems.
* Through a real coordinator: a workflow started by a raw client with knobs no timer or batch
  can take (NaN, infinite, 0 where at least 1 is needed), given to it or in a carried state,
  still answers requests, with the defaults in their place; streamctl's own start refuses
  such a configuration with a message naming each knob.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
from conftest import coordinator_worker
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.client import Client

from streamctl.client.client import CoordinatorClient
from streamctl.protocol import messages as m
from streamctl.protocol.coordinator_config import (
    MAX_BATCH_TIMEOUT,
    MAX_CONFIG_SECONDS,
    CoordinatorConfig,
)
from streamctl.worker.coordinator_worker import ensure_coordinator
from streamctl.workflows.coordinator import CoordinatorWorkflow
from streamctl.workflows.state import CoordinatorInput, CoordinatorState

COUNTS = {
    "batch_size": 1,
    "max_pending": 1,
    "max_batch_bytes": 1,
    "passes_per_run": 1,
    "max_history_events": 1,
    "max_actions_under_way": 1,
    "max_restarts": 0,
}
"""Knobs that count something, with their least value."""
SECONDS = {
    "timeout": MAX_BATCH_TIMEOUT,
    "action_drain_timeout": MAX_CONFIG_SECONDS,
    "suspect_after": MAX_CONFIG_SECONDS,
    "dead_after": MAX_CONFIG_SECONDS,
    "restart_delay": MAX_CONFIG_SECONDS,
    "restart_max_delay": MAX_CONFIG_SECONDS,
    "pass_timeout": MAX_CONFIG_SECONDS,
}
"""Durations, with their greatest value."""
NOT_ZERO = {"suspect_after", "dead_after", "pass_timeout"}


GREATEST_COUNT = {"max_actions_under_way": 1000}


def good(name: str, value: Any) -> bool:
    if name in COUNTS:
        greatest = GREATEST_COUNT.get(name, 2**31 - 1)
        return type(value) is int and COUNTS[name] <= value <= greatest
    if type(value) not in (int, float) or value != value:  # NaN
        return False
    lowest_ok = value >= 0.001 if name in NOT_ZERO else value >= 0
    return lowest_ok and value <= SECONDS[name]


ANY_VALUE = (
    st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0, 1, -1, 0.0, -0.0, 60.0, 60.0001, 86_400.0, 86_401, True, False])
    | st.sampled_from([1e-9, 0.0009, 0.001, 1000, 1001, 2000])
    | st.sampled_from([10**400, -(10**400)])  # beyond a float: comparing must not overflow
    | st.none()
    | st.text(max_size=3)
)


@pytest.mark.quick
@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from([*COUNTS, *SECONDS]), ANY_VALUE))
def test_problems_name_exactly_the_bad_knobs_and_usable_replaces_only_those(
    knobs: dict[str, Any],
) -> None:
    config = CoordinatorConfig(**knobs)
    bad = {name for name, value in knobs.items() if not good(name, value)}
    problems = config.problems()
    assert {problem.split(" ", 1)[0] for problem in problems} == bad
    assert len(problems) == len(bad)
    usable = config.usable()
    # A run may hold more actions under way than a start may ask for (runs recorded before
    # the bound must replay): usable() keeps such a count, and the workflow caps it.
    actions = knobs.get("max_actions_under_way")
    kept = {"max_actions_under_way"} if type(actions) is int and 1000 < actions < 2**31 else set()
    assert {problem.split(" ", 1)[0] for problem in usable.problems()} == kept
    defaults = CoordinatorConfig()
    for field in dataclasses.fields(CoordinatorConfig):
        expected = getattr(defaults if field.name in bad - kept else config, field.name)
        assert getattr(usable, field.name) == expected


@pytest.mark.parametrize("carried", [False, True], ids=["started", "carried"])
async def test_a_raw_start_with_unusable_knobs_still_answers_and_streamctl_refuses_one(
    temporal_client: Client, temporal: Any, sqlite_url: str, carried: bool
) -> None:
    # "carried": the configuration comes in the state a run hands on through continue-as-new
    unusable = CoordinatorConfig(batch_size=0, timeout=math.inf, pass_timeout=math.nan)
    with pytest.raises(ValueError, match=r"batch_size.*timeout.*pass_timeout"):
        await ensure_coordinator(temporal_client, workflow_id="never-started", config=unusable)
    start = (
        CoordinatorInput(state=CoordinatorState(config=unusable))
        if carried
        else CoordinatorInput(config=unusable)
    )

    suffix = uuid.uuid4().hex[:10]
    task_queue, workflow_id = f"coordinator-{suffix}", f"coordinator-{suffix}"
    async with coordinator_worker(temporal_client, sqlite_url, task_queue):
        handle = await temporal_client.start_workflow(
            CoordinatorWorkflow.run,
            start,
            id=workflow_id,
            task_queue=task_queue,
        )
        client = await CoordinatorClient(temporal.address, workflow_id=workflow_id).connect()
        try:
            created = await client.ask(
                m.CreateLogicalSource("s", (m.ColumnSpec("id", "UINT64", False),))
            )
            assert created["name"] == "s"
            assert (await client.ask(m.GetLogicalSource("s")))["name"] == "s"
        finally:
            await asyncio.to_thread(client.close)
            await handle.terminate("test done")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("STREAMCTL_BATCH_SIZE", "abc"),
        ("STREAMCTL_BATCH_SIZE", "1.5"),
        ("STREAMCTL_BATCH_TIMEOUT", "x"),
    ],
)
def test_a_bad_knob_variable_is_a_usage_error_of_the_commands_that_read_it(
    variable: str, value: str, tmp_path: Any
) -> None:
    """It was read when the CLI was imported: every command, ``--help`` too, died with a
    traceback (an adversarial review)."""
    env = {**os.environ, variable: value}
    command = [sys.executable, "-m", "streamctl.cli"]
    shown = subprocess.run([*command, "--help"], env=env, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    for arguments in (["up", "--state-dir", str(tmp_path)], ["coordinator"]):
        refused = subprocess.run([*command, *arguments], env=env, capture_output=True, text=True)
        assert refused.returncode == 2, (arguments, refused.stdout, refused.stderr)
        assert variable in refused.stderr and "Traceback" not in refused.stderr

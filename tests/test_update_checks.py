"""What the coordinator's update validators refuse (:mod:`streamctl.workflows.update_checks`),
by phase of the run, and the outage pauses of a pass (:mod:`streamctl.workflows.pass_runner`)."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.exceptions import ApplicationError

from streamctl.compact_json import dumps
from streamctl.limits import MAX_QUERY_WAITERS, MAX_REQUESTS_PER_UPDATE, MIN_QUERY_WAIT_SECONDS
from streamctl.protocol import refusals
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.raw_payloads import JSON_ENCODING
from streamctl.workflows.pass_runner import CATALOG_OUTAGE_MAX_PAUSE, outage_pause
from streamctl.workflows.run_phase import RunPhaseMachine
from streamctl.workflows.update_checks import check_submit, check_wait_query

pytestmark = pytest.mark.quick

CONFIG = CoordinatorConfig(max_pending=10, max_batch_bytes=2000)


def payload(ids: list[str], kind: str = "ListQueries", encoding: bytes = JSON_ENCODING) -> Payload:
    envelopes = [{"id": i, "kind": kind, "body": {}} for i in ids]
    return Payload(metadata={"encoding": encoding}, data=dumps(envelopes).encode())


def phases(phase: str) -> RunPhaseMachine:
    machine = RunPhaseMachine()
    machine.serve_while_draining = True
    if phase in ("draining", "closing"):
        machine.continue_as_new_due(now=0.0, drain_timeout=1.0)
    if phase == "closing":
        machine.drained()
    return machine


def refusal(check: Any, *args: Any) -> str | None:
    try:
        check(*args)
    except ApplicationError as error:
        return error.type
    return None


def submit(ids: list[str], data: Payload, phase: str = "serving", pending: int = 0) -> str | None:
    return refusal(check_submit, ids, data, CONFIG, phases(phase), pending)


def test_a_serving_run_takes_a_well_formed_batch() -> None:
    assert submit(["a", "b"], payload(["a", "b"])) is None
    assert submit(["a"], payload(["a"], kind="StartQuery")) is None


@pytest.mark.parametrize(
    ("ids", "data"),
    [
        ([], payload([])),
        (["a", ""], payload(["a", ""])),
        (["a"] * (MAX_REQUESTS_PER_UPDATE + 1), payload(["a"] * (MAX_REQUESTS_PER_UPDATE + 1))),
        (["a"], payload(["a"], encoding=b"binary/encrypted")),
        (["a"], payload(["a"], encoding=b"binary/protobuf")),
        (["a"] * 80, payload(["a"] * 80)),  # over max_batch_bytes
        (["a", "b"], payload(["b", "a"])),  # ids and envelopes disagree
    ],
)
def test_a_malformed_batch_is_invalid(ids: list[str], data: Payload) -> None:
    assert submit(ids, data) == refusals.INVALID_BATCH


def test_a_draining_run_refuses_only_starts_and_a_closing_one_everything() -> None:
    assert submit(["a"], payload(["a"]), phase="draining") is None
    starts = payload(["a"], kind="StartQuery")
    assert submit(["a"], starts, phase="draining") == refusals.CONTINUING_AS_NEW
    assert submit(["a"], payload(["a"]), phase="closing") == refusals.CONTINUING_AS_NEW
    assert submit([], payload([]), phase="closing") == refusals.CONTINUING_AS_NEW


def test_a_full_buffer_is_busy_but_an_empty_one_takes_any_batch() -> None:
    assert submit(["a", "b"], payload(["a", "b"]), pending=9) == refusals.BUSY
    assert submit(["a"], payload(["a"]), pending=9) is None
    many = [str(n) for n in range(12)]
    assert submit(many, payload(many), pending=0) is None


def wait(*args: Any, phase: str = "serving", open_waits: int = 0) -> str | None:
    return refusal(check_wait_query, *args, phases(phase), open_waits)


def test_wait_query_refusals() -> None:
    assert wait(1, ["RUNNING"], MIN_QUERY_WAIT_SECONDS) is None
    assert wait(1, ["RUNNING"], 5, phase="draining") is None
    assert wait(1, ["RUNNING"], 5, phase="closing") == refusals.CONTINUING_AS_NEW
    assert wait(1, ["RUNNING"], 5, open_waits=MAX_QUERY_WAITERS) == refusals.BUSY
    for bad in [
        ("1", ["RUNNING"], 5),
        (True, ["RUNNING"], 5),
        (2**63, ["RUNNING"], 5),
        (1, "RUNNING", 5),
        (1, [1], 5),
        (1, ["RUNNING"], "5"),
        (1, ["RUNNING"], MIN_QUERY_WAIT_SECONDS / 2),
        (1, ["RUNNING"], float("nan")),
    ]:
        assert wait(*bad) == refusals.INVALID_BATCH, bad


def test_a_catalog_outage_is_tried_again_with_growing_pauses_up_to_a_cap() -> None:
    assert [outage_pause(n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert outage_pause(1000) == CATALOG_OUTAGE_MAX_PAUSE
    assert outage_pause(5000) == CATALOG_OUTAGE_MAX_PAUSE  # 2.0**5000 would overflow

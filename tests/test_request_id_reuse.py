"""A request id names one request (issue 16, item 6): the pass activity on both catalogs.

A retry (same id, same request) gets the stored answer and is not applied again; the same id
with a different request is refused with ``ID_REUSED`` naming the id, across passes (against
the stored request) and inside one pass (against the id's first occurrence), and a replayed
pass answers alike. On f29f918 the different request silently got the first one's answer.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamctl.activities.pass_activity import CatalogWork
from streamctl.client.coordinator_errors import UndecodableAnswer
from streamctl.client.pump import pair_answers
from streamctl.protocol import messages as m
from streamctl.protocol.pass_io import PassInput, QuarantineInput, request_batches_json

pytestmark = pytest.mark.quick

SCHEMA = (m.ColumnSpec("id", "UINT64", False),)


def answers(
    activities: CatalogWork, pass_no: int, *batches: list[tuple[str, m.Request]]
) -> list[list[dict[str, Any]]]:
    """Apply one pass of request batches with the given ids; each batch's answers."""
    envelopes = [[request.to_envelope(request_id) for request_id, request in b] for b in batches]
    result = activities.apply_pass(
        PassInput("w", pass_no, 1000.0, [], [1000.0] * len(batches), 30.0, 60.0),
        request_batches_json(envelopes),
    )
    return [json.loads(batch) for batch in result.responses]


def outcome(answer: dict[str, Any]) -> str:
    return "ok" if answer["ok"] else answer["error_code"]


def test_a_reused_id_with_another_request_is_refused_across_passes(catalog_url):
    """Fails on f29f918 (the second request is answered ok with the first one's answer)."""
    activities = CatalogWork(catalog_url)
    [[first]] = answers(activities, 1, [("id-1", m.CreateLogicalSource("first", SCHEMA))])
    assert outcome(first) == "ok"

    [[other]] = answers(activities, 2, [("id-1", m.CreateLogicalSource("other", SCHEMA))])
    assert outcome(other) == "ID_REUSED", other
    assert other["id"] == "id-1" and "'id-1'" in other["error_message"], other
    assert "CreateLogicalSource" in other["error_message"]
    [[again, listed]] = answers(
        activities,
        3,
        [("id-1", m.CreateLogicalSource("first", SCHEMA)), ("id-2", m.ListLogicalSources())],
    )
    assert again == first  # a retry: the stored answer, applied once
    assert [source["name"] for source in listed["result"]] == ["first"]  # "other" never was

    # Another kind under a used id, and a repeat of the refused request: refused both times.
    [[kind, repeat]] = answers(
        activities, 4, [("id-1", m.DropLogicalSource("first")), ("id-1", m.ListSinks())]
    )
    assert (outcome(kind), outcome(repeat)) == ("ID_REUSED", "ID_REUSED")


def test_a_reused_id_with_another_request_is_refused_inside_one_pass(catalog_url):
    """Fails on f29f918 (the second sink's request gets the first sink's answer)."""
    activities = CatalogWork(catalog_url)
    sink = {"file_path": "out/a"}
    first, second = m.CreateSink("a", SCHEMA, "FILE", sink), m.CreateSink("b", SCHEMA, "FILE", sink)
    batches = [[("dup", first)], [("dup", second), ("dup", first)]]
    [[one], [two, three]] = answers(activities, 1, *batches)
    assert (outcome(one), outcome(two)) == ("ok", "ID_REUSED"), (one, two)
    assert three == one  # the identical repeat inside the pass shares the first answer
    [[listed]] = answers(activities, 2, [("list", m.ListSinks())])
    assert [row["name"] for row in listed["result"]] == ["a"]

    # The pass retried after it committed (an activity retry) answers exactly alike.
    envelopes = [[request.to_envelope(request_id) for request_id, request in b] for b in batches]
    replayed = activities.apply_pass(
        PassInput("w", 1, 1000.0, [], [1000.0, 1000.0], 30.0, 60.0),
        request_batches_json(envelopes),
    )
    assert replayed.replayed
    assert [json.loads(batch) for batch in replayed.responses] == [[one], [two, three]]


def test_a_retry_of_a_set_aside_request_gets_its_stored_answer(catalog_url):
    """A request that failed every pass is set aside with its answer stored under its id; the
    client's retry of that id (the same request) gets that answer. It was refused
    ``ID_REUSED``: ``set_aside`` stores the request as ``{"unstorable": text}``, a shape the
    comparison with the stored request did not know."""
    activities = CatalogWork(catalog_url)
    poison = m.CreateLogicalSource("poison", SCHEMA)
    envelope = poison.to_envelope("id-poison")
    activities.set_aside(
        QuarantineInput(
            "id-poison",
            envelope.kind,
            repr(envelope.body),
            "pass 1",
            "the pass failed on this message alone",
            m.Response(
                id="id-poison",
                ok=False,
                error_code="INTERNAL",
                error_message="the pass failed on this request alone",
            ),
        )
    )
    [[retry]] = answers(activities, 2, [("id-poison", poison)])
    assert outcome(retry) == "INTERNAL", retry
    assert retry["error_message"] == "the pass failed on this request alone"


def test_two_requests_under_one_id_in_one_update_each_get_their_own_answer(catalog_url):
    """The pass answers a batch by position: the first request under an id is applied, the
    second refused ``ID_REUSED``. The client paired a batch's answers by id, so both callers
    got the last answer, although the first request was applied."""
    activities = CatalogWork(catalog_url)
    first, second = m.CreateLogicalSource("first", SCHEMA), m.CreateLogicalSource("second", SCHEMA)
    [answered] = answers(activities, 1, [("id-1", first), ("id-1", second)])
    responses = [m.Response(**plain) for plain in answered]
    mine, theirs = pair_answers(["id-1", "id-1"], responses)
    assert isinstance(mine, m.Response) and mine.ok, mine
    assert isinstance(theirs, m.Response) and theirs.error_code == "ID_REUSED", theirs


def test_answers_out_of_order_are_paired_by_id():
    responses = [m.Response(id=f"id-{n}", ok=True, result=n) for n in (3, 1, 2)]
    paired = pair_answers(["id-1", "id-2", "id-3", "id-4"], responses)
    assert [getattr(p, "result", None) for p in paired[:3]] == [1, 2, 3]
    assert isinstance(paired[3], UndecodableAnswer)

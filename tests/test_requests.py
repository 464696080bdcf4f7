"""Requests through the real coordinator workflow on the Temporal dev server, on both catalogs."""

from __future__ import annotations

import asyncio

import pytest
from catalog_tools import failed_workflow_tasks
from temporalio.client import WorkflowUpdateFailedError

from streamctl import config
from streamctl.client import coordinator_errors as errors
from streamctl.client.outbox import new_id
from streamctl.error_codes import ErrorCode
from streamctl.protocol import messages as m
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.protocol.messages import Envelope

SCHEMA = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("value", "INT32"))


async def test_create_get_list_drop_with_cascade(start_coordinator, catalog_url):
    coordinator = await start_coordinator(catalog_url)
    client = await coordinator.client().connect()
    try:
        created = await client.ask(m.CreateLogicalSource("orders", SCHEMA))
        assert created["schema"][0] == {"name": "id", "type": "UINT64", "nullable": False}
        physical = await client.ask(m.CreatePhysicalSource("orders", "file", {"file_path": "data"}))
        assert physical["type"] == "FILE" and physical["logical_source"] == "orders"
        await client.ask(m.CreateSink("out", SCHEMA, "Print"))

        assert [s["name"] for s in await client.ask(m.ListLogicalSources())] == ["orders"]
        # Stored in canonical form: NebulaStream's option names accepted, defaults filled in.
        assert (await client.ask(m.GetPhysicalSource(physical["id"])))["config"] == {
            "file_path": str(config.files_dir() / "data"),
            "format": "CSV",
            "field_delimiter": ",",
            "tuple_delimiter": "\n",
            "allow_delimiter_in_quotes": True,
        }
        refused = await client.ask_response(
            m.CreatePhysicalSource("orders", "FILE", {"FILE_PATH": "d", "PARSER.TYPE": "XML"})
        )
        assert (refused.ok, refused.error_code) == (False, "INVALID_REQUEST")
        assert "XML" in (refused.error_message or ""), refused
        assert [p["id"] for p in await client.ask(m.ListPhysicalSources("orders"))] == [
            physical["id"]
        ]
        assert (await client.ask(m.GetSink("out")))["type"] == "PRINT"

        with pytest.raises(errors.HasDependents) as refused:
            await client.ask(m.DropLogicalSource("orders"))
        assert "1 physical source" in refused.value.message and "CASCADE" in refused.value.message

        dropped = await client.ask(m.DropLogicalSource("orders", cascade=True))
        assert dropped["physical_sources"] == [physical["id"]]
        with pytest.raises(errors.NotFound):
            await client.ask(m.GetPhysicalSource(physical["id"]))
        assert await client.ask(m.ListLogicalSources()) == []
        await client.ask(m.DropSink("out"))
        assert await client.ask(m.ListSinks()) == []
        assert await client.ask(m.ListWorkers()) == []
    finally:
        await asyncio.to_thread(client.close)


async def test_retried_request_id_is_answered_from_the_store(start_coordinator, sqlite_url):
    coordinator = await start_coordinator(sqlite_url)
    client = await coordinator.client().connect()
    try:
        request_id = new_id()
        first = await client.ask_response(m.CreateLogicalSource("s", SCHEMA), request_id=request_id)
        again = await client.ask_response(m.CreateLogicalSource("s", SCHEMA), request_id=request_id)
        assert first.ok and again == first  # same answer, not ALREADY_EXISTS
        other = await client.ask_response(m.CreateLogicalSource("s", SCHEMA))
        assert other.error_code == ErrorCode.ALREADY_EXISTS
    finally:
        await asyncio.to_thread(client.close)


BAD_INPUT: list[tuple[Envelope, str, str]] = [
    (Envelope("", "CreateSink", {"name": 1}), ErrorCode.INVALID_REQUEST, "field 'name'"),
    (
        Envelope("", "CreateLogicalSource", {"name": "x"}),
        ErrorCode.INVALID_REQUEST,
        "field 'schema'",
    ),
    (
        Envelope("", "CreateLogicalSource", {"name": "x", "schema": "id INT"}),
        ErrorCode.INVALID_REQUEST,
        "schema",
    ),
    (Envelope("", "DropTheWorld", {}), ErrorCode.UNKNOWN_KIND, "DropTheWorld"),
    (Envelope("", "ListSinks", {}, v=99), ErrorCode.UNSUPPORTED_VERSION, "version 99"),
    (Envelope("", "ListSinks", {"bogus": 1}), ErrorCode.INVALID_REQUEST, "'bogus'"),
    (
        Envelope(
            "", "CreateLogicalSource", {"name": "x", "schema": [{"name": "a", "type": "INTEGER"}]}
        ),
        ErrorCode.INVALID_SCHEMA,
        "unknown type 'INTEGER'",
    ),
    (
        Envelope(
            "",
            "CreateLogicalSource",
            {"name": "x", "schema": [{"name": "a", "type": "INT8"}, {"name": "A", "type": "INT8"}]},
        ),
        ErrorCode.INVALID_SCHEMA,
        "appears twice",
    ),
    (
        Envelope("", "CreateLogicalSource", {"name": "x", "schema": []}),
        ErrorCode.INVALID_SCHEMA,
        "at least one",
    ),
    (
        Envelope(
            "",
            "CreateLogicalSource",
            {"name": "1; DROP", "schema": [{"name": "a", "type": "INT8"}]},
        ),
        ErrorCode.INVALID_NAME,
        "not a valid identifier",
    ),
    (
        Envelope(
            "",
            "CreateSink",
            {"name": "s", "schema": [{"name": "a", "type": "INT8"}], "type": "Teleport"},
        ),
        ErrorCode.INVALID_REQUEST,
        "unknown sink type 'Teleport'",
    ),
    (
        Envelope("", "CreatePhysicalSource", {"logical_source": "nope", "type": "FILE"}),
        ErrorCode.NOT_FOUND,
        "'nope'",
    ),
    (
        Envelope("", "GetLogicalSource", {"name": "nope"}),
        ErrorCode.NOT_FOUND,
        "'nope' does not exist",
    ),
    (Envelope("", "DropSink", {"name": "nope"}), ErrorCode.NOT_FOUND, "'nope'"),
    (Envelope("", "DropPhysicalSource", {"id": "seven"}), ErrorCode.INVALID_REQUEST, "field 'id'"),
    (
        Envelope(
            "",
            "CreateLogicalSource",
            {"name": "big", "schema": [{"name": "a" * 100, "type": "INT8"}] * 3000},
        ),
        ErrorCode.TOO_LARGE,
        "limit",
    ),
    (
        Envelope("", "CreateQuery", {"statement": "SELECT * FROM x INTO y"}),
        "UNKNOWN_SOURCE",
        "line 1, column 15: unknown logical source 'X'",
    ),
    (
        Envelope("", "CreateQuery", {"statement": "SELEC * FROM x INTO y"}),
        "SYNTAX_ERROR",
        "line 1, column 1",
    ),
    (
        Envelope("", "ExecuteStatement", {"text": "SHOW SINKS;\nSHOW QUERIES WHERE colour = 'x'"}),
        "INVALID_STATEMENT",
        "line 2, column 20: queries have no attribute 'colour'",
    ),
    (Envelope("", "ListChanges", {"limit": 0}), ErrorCode.INVALID_REQUEST, "limit must be"),
    (Envelope("", "ListChanges", {"limit": "all"}), ErrorCode.INVALID_REQUEST, "field 'limit'"),
]


async def test_bad_input_gets_a_per_request_error_and_no_failed_workflow_task(
    start_coordinator, sqlite_url
):
    coordinator = await start_coordinator(
        sqlite_url, CoordinatorConfig(batch_size=100, timeout=0.05)
    )
    client = await coordinator.client().connect()
    try:
        await client.ask(m.CreateLogicalSource("dup", SCHEMA))
        await client.ask(m.CreatePhysicalSource("dup", "FILE", {"file_path": "d"}))
        cases = [
            *BAD_INPUT,
            (
                Envelope(
                    "",
                    "CreateLogicalSource",
                    {"name": "dup", "schema": [{"name": "a", "type": "INT8"}]},
                ),
                ErrorCode.ALREADY_EXISTS,
                "already exists",
            ),
            (
                Envelope("", "DropLogicalSource", {"name": "dup"}),
                ErrorCode.HAS_DEPENDENTS,
                "CASCADE",
            ),
        ]
        good = client.ask_response(m.CreateSink("fine", SCHEMA, "VOID"))
        responses = await asyncio.gather(
            good,
            *(client.ask_envelope(Envelope(new_id(), e.kind, e.body, e.v)) for e, _, _ in cases),
        )
        assert responses[0].ok, "a good request in the same batch is unaffected"
        for response, (envelope, code, text) in zip(responses[1:], cases, strict=True):
            assert not response.ok, envelope
            assert response.error_code == code, (envelope.kind, response)
            assert text in (response.error_message or ""), (envelope.kind, response.error_message)

        # Malformed at the transport level: the update is rejected, nothing else is hurt.
        with pytest.raises(WorkflowUpdateFailedError) as rejected:
            await coordinator.handle.execute_update("submit", args=["not a list", []])
        assert "Failed decoding arguments" in str(rejected.value.cause)
        with pytest.raises(WorkflowUpdateFailedError) as rejected:
            await coordinator.handle.execute_update(
                "submit", args=[[""], [{"id": "", "kind": "ListSinks"}]]
            )
        assert "non-empty string id" in str(rejected.value.cause)
        # A malformed envelope inside a well-formed batch costs only its own answer.
        answers = await coordinator.handle.execute_update(
            "submit",
            args=[["m1", "m2"], [42, {"id": "m2", "kind": "ListSinks", "body": {}, "v": 1}]],
        )
        assert answers[0]["error_code"] == ErrorCode.INVALID_REQUEST
        assert answers[1]["ok"] and answers[1]["id"] == "m2"
        await coordinator.handle.signal("events", {"sender": 5, "seq": "x", "events": 3})
        await coordinator.handle.signal("events", "garbage")

        assert (await client.ask(m.GetSink("fine")))["type"] == "VOID"
        assert await failed_workflow_tasks(coordinator.handle) == 0
    finally:
        await asyncio.to_thread(client.close)


async def test_reads_whose_results_their_pass_could_not_keep_are_asked_again(
    start_coordinator, sqlite_url
):
    """A pass hands back at most MAX_PASS_RESULT_BYTES of answers; the reads past that are
    answered UNAVAILABLE "... ask again" (nothing was applied). The client library asks them
    again itself, so every caller gets its listing."""
    coordinator = await start_coordinator(sqlite_url)
    wide = tuple(m.ColumnSpec(f"column_{i:03d}_{'x' * 100}", "FLOAT64") for i in range(100))
    client = await coordinator.client().connect()
    try:
        created = await asyncio.gather(
            *(client.ask_response(m.CreateLogicalSource(f"wide_{n}", wide)) for n in range(40))
        )
        assert all(answer.ok for answer in created)
        # Each full page is ~384 KB: twelve of them are more than three passes can hand back.
        listings = await asyncio.gather(
            *(client.ask_response(m.ListLogicalSources(limit=1000)) for _ in range(12))
        )
        assert [answer.error_code for answer in listings] == [None] * 12, [
            answer.error_message for answer in listings if not answer.ok
        ]
        assert client.stats.requests_asked_again > 0  # the case this test is about did occur
    finally:
        await asyncio.to_thread(client.close)


async def test_a_request_asked_after_an_event_was_accepted_sees_the_event(
    start_coordinator, sqlite_url
):
    """DESIGN: messages apply in arrival order. ``send`` returns once the coordinator accepted
    the event, so a request asked after it must see it, even when one workflow task takes in
    both (they then share an arrival time; the pass used to apply the request first)."""
    coordinator = await start_coordinator(sqlite_url, CoordinatorConfig(timeout=0.05))
    client = await coordinator.client().connect()
    try:
        for i in range(20):
            await client.send(m.RegisterWorker(f"w{i}"))
            answer = await client.ask_response(m.GetWorker(f"w{i}"))
            assert answer.ok, (i, answer)
            await client.send(m.UnregisterWorker(f"w{i}"))
            assert (await client.ask(m.GetWorker(f"w{i}")))["state"] == "UNREGISTERED", i
        assert await failed_workflow_tasks(coordinator.handle) == 0
    finally:
        await asyncio.to_thread(client.close)

"""Fuzzing ``ExecuteStatement``: random and mutated NebulaStream statements, first against the
pass activity (many examples, fast), then through the real coordinator workflow: every one gets
exactly one answer, a refusal carries a known code and a message, nothing is an internal error,
and the workflow history holds no failed workflow task."""

from __future__ import annotations

import asyncio
import json

import pytest
from conformance import suite_present, systests_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.api.enums.v1 import EventType
from test_pass_activity import run_pass

from streamctl.activities.pass_activity import CatalogWork
from streamctl.error_codes import PLANNER_ERROR_CODES, ErrorCode
from streamctl.protocol import messages as m
from streamctl.systest.suite_files import read_systest

SUITE = systests_dir()

KNOWN_CODES = PLANNER_ERROR_CODES | {
    value for name, value in vars(ErrorCode).items() if name.isupper() and name != "INTERNAL"
}

SEED_STATEMENTS = [
    "CREATE LOGICAL SOURCE s(a INT32 NOT NULL, b VARSIZED, ts UINT64 NOT NULL);",
    "CREATE PHYSICAL SOURCE FOR s TYPE File SET('/tmp/x.csv' AS `SOURCE`.FILE_PATH);",
    "CREATE SINK o(a INT32 NOT NULL, n UINT64 NOT NULL) TYPE File;",
    "SELECT a, COUNT(a) AS n FROM s GROUP BY a WINDOW TUMBLING(ts, SIZE 1 SEC) INTO o;",
    "SELECT a * 2 + 1 AS a, ts AS n FROM s WHERE a > 3 AND b = 'x' INTO o;",
    "SHOW QUERIES WHERE state = 'RUNNING' FORMAT JSON;",
    "DROP SINK o CASCADE; DROP LOGICAL SOURCE s CASCADE;",
    "EXPLAIN SELECT a FROM s INTO o;",
    "CREATE WORKER w SET(2 AS CAPACITY);",
]
SUITE_STATEMENTS = [
    block.text
    for path in (sorted((SUITE / "guide").glob("*.test"))[:6] if suite_present() else [])
    for block in read_systest(path, SUITE).blocks
][:40]
"""More seeds from the suite's guide files; without the suite (``STREAMCTL_CONFORMANCE``) the
fuzzing mutates the seeds above only."""
TOKENS = [
    "SELECT", "FROM", "WHERE", "INTO", "GROUP", "BY", "WINDOW", "TUMBLING", "SLIDING", "SIZE",
    "ADVANCE", "SEC", "MS", "UNION", "JOIN", "ON", "CREATE", "LOGICAL", "PHYSICAL", "SOURCE",
    "SINK", "WORKER", "TYPE", "SET", "AS", "SHOW", "DROP", "EXPLAIN", "QUERY", "CASCADE", "FOR",
    "(", ")", ",", ";", "*", "+", "-", "/", "=", "<", ">", "'", "`", "\"", ".", "1", "-9", "1e309",
    "s", "o", "a", "b", "ts", "INT8", "UINT64", "FLOAT64", "VARSIZED", "NULL", "TRUE", "\n", "\x00",
    "é", "🙂", "9" * 40,
]  # fmt: skip


@st.composite
def statements(draw: st.DrawFn) -> str:
    choice = draw(st.integers(0, 2))
    if choice == 0:  # a token soup
        return " ".join(draw(st.lists(st.sampled_from(TOKENS), max_size=30)))
    if choice == 1:  # arbitrary text
        return draw(st.text(max_size=200))
    seed = draw(st.sampled_from(SEED_STATEMENTS + SUITE_STATEMENTS))
    for _ in range(draw(st.integers(1, 4))):  # mutate: delete, insert or replace a slice
        at = draw(st.integers(0, len(seed)))
        width = draw(st.integers(0, 8))
        insert = draw(st.sampled_from(["", *TOKENS]))
        seed = seed[:at] + insert + seed[at + width :]
    return seed


def check(answer: dict[str, object]) -> None:
    if answer["ok"]:
        assert isinstance(answer["result"], dict) and "statements" in answer["result"]
        return
    assert answer["error_code"] in KNOWN_CODES, answer
    assert isinstance(answer["error_message"], str) and answer["error_message"], answer


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(texts=st.lists(statements(), min_size=1, max_size=8))
def test_random_statements_get_a_clear_answer_from_the_pass(tmp_path_factory, texts):
    url = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'catalog.db'}"
    activities = CatalogWork(url)
    run_pass(activities, 1, [m.ExecuteStatement(SEED_STATEMENTS[0] + SEED_STATEMENTS[2])])
    answers = run_pass(activities, 2, [m.ExecuteStatement(text) for text in texts])
    assert len(answers) == len(texts)
    for answer in answers:
        check(answer)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
async def test_random_statements_never_fail_a_workflow_task(start_coordinator, sqlite_url):
    coordinator = await start_coordinator(sqlite_url)
    client = await coordinator.client().connect()
    texts = [statements().example() for _ in range(300)]
    try:
        responses = await asyncio.gather(
            *(client.ask_response(m.ExecuteStatement(text)) for text in texts)
        )
        assert len(responses) == len(texts)
        for response in responses:
            check(json.loads(json.dumps(response.__dict__)))
        assert await client.ask(m.ListLogicalSources()) is not None  # still answering
    finally:
        await asyncio.to_thread(client.close)
    failed = [
        event
        async for event in coordinator.handle.fetch_history_events()
        if event.event_type
        in (EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED, EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT)
    ]
    assert failed == []

"""``streamctl systest`` and the payload key (issue 16, measurement 4).

* The runner holds the key of the stack it runs on: the one in the stack's state dir, even
  when that is not the default state dir. On f29f918 it connected with the default state dir's
  key (here: none), the stack encrypted an answer about a PostgreSQL sink, the runner's
  client could not decode it and the run hung (its test fails there by the guard).
* The codec's scan encrypts payloads that carry a secret option's value, and not those that
  merely use a secret word as an identifier: a column named ``KEY``, ``key``, ``PASSWORD`` or
  ``token``. On f29f918 any payload containing ``password`` or ``token`` anywhere was
  encrypted (the cases with such columns fail there).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import json
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from conftest import DevServer, coordinator_worker
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from temporalio.api.common.v1 import Payload

from streamctl import config
from streamctl.secret_options import SECRET_WORDS
from streamctl.systest.progress import run_systest_command
from streamctl.worker.coordinator_worker import ensure_coordinator
from streamctl.workflows.payload_crypto import SecretPayloadCodec
from streamctl.workflows.payload_crypto import mentions_secret as carries_secret
from streamctl.workflows.wire import ZlibCodec, connect

KEYED_FILE = """# name: keyed.test
CREATE LOGICAL SOURCE s(KEY UINT64 NOT NULL, PASSWORD VARSIZED, token INT32);
CREATE SINK pg(KEY UINT64 NOT NULL) TYPE PostgreSQL SET('out' AS `SINK`.TABLE,
    'app' AS `SINK`.DATABASE, 'hunter2' AS `SINK`.PASSWORD);

SELECT missing FROM s INTO pg;
----
ERROR 2003
"""
"""Its PostgreSQL sink makes the coordinator encrypt the answer (the masked password); its
query is refused as NebulaStream expects, so it runs without Spark."""


@pytest.fixture
async def stack_state(
    temporal: DevServer, sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[str, Path]]:
    """A coordinator holding the key of a stack state dir that is not the default one, as
    ``streamctl systest --state-dir DIR`` starts it; the default state dir has no key."""
    monkeypatch.delenv("STREAMCTL_PAYLOAD_KEY", raising=False)
    monkeypatch.setenv("STREAMCTL_STATE_DIR", str(tmp_path / "default-state"))
    state = tmp_path / "stack-state"
    keys = config.parse_payload_keys(config.ensure_payload_key(state))
    assert config.payload_keys() == ()  # the default state dir holds none
    client = await connect(temporal.address, payload_keys=keys)
    suffix = os.urandom(5).hex()
    task_queue, workflow_id = f"coordinator-{suffix}", f"coordinator-stack-{suffix}"
    async with coordinator_worker(client, sqlite_url, task_queue):
        handle = await ensure_coordinator(client, workflow_id=workflow_id, task_queue=task_queue)
        yield workflow_id, state
        await handle.terminate("test over")


async def test_systest_holds_the_key_of_the_stack_in_its_state_dir(
    temporal: DevServer, stack_state: tuple[str, Path], tmp_path: Path
) -> None:
    workflow_id, state = stack_state
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "keyed.test").write_text(KEYED_FILE)
    output = io.StringIO()
    finished: concurrent.futures.Future[int] = concurrent.futures.Future()

    def run() -> None:  # a daemon thread: on f29f918 this call never returns
        console = Console(file=output, width=200)
        try:
            code = run_systest_command(
                temporal.address, workflow_id, [suite], 1, set(), False, state, console
            )
        except BaseException as error:
            finished.set_exception(error)
        else:
            finished.set_result(code)

    threading.Thread(target=run, daemon=True).start()
    done, _ = await asyncio.wait([asyncio.wrap_future(finished)], timeout=60)
    printed = output.getvalue()
    assert done, f"streamctl systest still running after 60 s:\n{printed}"
    assert printed.rstrip().splitlines()[-1] == "1 passed, 0 failed, 0 unsupported", printed
    assert finished.result() == 0


# --- the scan: names of options, not identifiers ------------------------------------------

COLUMNS_NAMED_LIKE_SECRETS = [
    "CREATE LOGICAL SOURCE s(KEY UINT64 NOT NULL, key INT32, PASSWORD VARSIZED, token INT32);",
    "SELECT KEY, key, PASSWORD, token FROM s WHERE password = 'x' AND token='y' INTO out;",
    "SELECT password AS secret, KEY * 2 AS password, CONCAT(a, 'x') AS token FROM s INTO out;",
    "CREATE SINK out(s.KEY UINT64, s.PASSWORD VARSIZED) TYPE File SET('o' AS `SINK`.FILE_PATH);",
    "SELECT KEY FROM File('in.csv' AS `SOURCE`.FILE_PATH, SCHEMA(KEY UINT64, password VARSIZED)"
    " AS `SOURCE`.`SCHEMA`) INTO File();",
]
ANSWERS_WITH_SUCH_COLUMNS = [
    {"schema": [{"name": "PASSWORD", "type": "VARSIZED", "nullable": True}]},
    {"statements": [{"statement": "SELECT", "result": {"sink": "token", "id": 3}}]},
]


def envelope(text: str) -> bytes:
    """How a statement travels: inside a request batch's JSON."""
    return json.dumps([{"id": "r-1", "kind": "ExecuteStatement", "body": {"text": text}}]).encode()


@pytest.mark.quick
@pytest.mark.parametrize("text", COLUMNS_NAMED_LIKE_SECRETS)
async def test_a_column_named_like_a_secret_is_no_secret(text: str) -> None:
    assert not carries_secret(text.encode())
    codec = SecretPayloadCodec(ZlibCodec(), (b"k" * 32,))
    payload = Payload(metadata={"encoding": b"json/plain"}, data=envelope(text))
    assert await codec.encode([payload]) == [payload]  # stays readable JSON


@pytest.mark.quick
@pytest.mark.parametrize("answer", ANSWERS_WITH_SUCH_COLUMNS)
def test_answers_naming_such_columns_are_no_secret(answer: dict[str, Any]) -> None:
    assert not carries_secret(json.dumps(answer).encode())


@pytest.mark.quick
@pytest.mark.parametrize(
    "text",
    [
        "SET(\n  'hunter2'\n  AS `SINK`.PASSWORD)",  # across lines, as the JSON escapes them
        'SET("hunter2" AS PASSWORD)',  # NebulaStream's double-quoted literal
        "SET('" + "h" * 3000 + "' AS `SINK`.PASSWORD)",  # longer than the look-back
        "INTO PostgreSQL('t' AS `SINK`.TABLE, 'pw''x' AS `SINK`.`PASSWORD`)",
        "SET('host=db password=pw' AS `SINK`.CONNECTION_URL)",
        "SET('x' AS `KAFKA.SASL.JAAS.CONFIG`)",
    ],
)
def test_secret_option_values_are_found_in_statements(text: str) -> None:
    assert carries_secret(text.encode()) and carries_secret(envelope(text))


@pytest.mark.quick
def test_secret_members_are_found_also_in_nested_json() -> None:
    nested = json.dumps({"config": json.dumps({"sasl_password": "pw"})}).encode()
    assert carries_secret(nested)
    assert carries_secret(json.dumps({"url": "host=db password=pw"}).encode())
    assert not carries_secret(json.dumps({"url": "postgresql://db/app"}).encode())


NAMES = st.builds(
    lambda prefix, word, suffix, upper: (
        (prefix + word + suffix).upper() if upper else prefix + word + suffix
    ),
    st.sampled_from(["", "my_", "x"]),
    st.sampled_from([*SECRET_WORDS, "key"]),
    st.sampled_from(["", "_1", "s"]),
    st.booleans(),
)
VALUES = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="'"), max_size=700)
SPACE = st.sampled_from([" ", "\n", "  ", "\t", "\n    "])


@pytest.mark.quick
@settings(max_examples=300, deadline=None)
@given(name=NAMES, other=NAMES, space=SPACE)
def test_property_identifiers_never_count_as_secrets(name: str, other: str, space: str) -> None:
    """Property: secret words as column names, in schemas, select lists, aliases of
    expressions and filters are never taken for secrets, as text or inside JSON."""
    statements = [
        f"CREATE LOGICAL SOURCE s({name} UINT64 NOT NULL,{space}{other} VARSIZED);",
        f"SELECT {name},{space}{other} AS {name}_2, {name} * 2{space}AS {other}"
        f"{space}FROM s WHERE {other} = 'v' INTO out;",
        f"CREATE SINK out(s.{name} UINT64) TYPE File;",
    ]
    for text in statements:
        assert not carries_secret(text.encode()), text
        assert not carries_secret(envelope(text)), text
    assert not carries_secret(json.dumps({"schema": [{"name": name}, {"name": other}]}).encode())


@pytest.mark.quick
@settings(max_examples=300, deadline=None)
@given(
    value=VALUES,
    word=st.sampled_from(SECRET_WORDS),
    prefix=st.sampled_from(["", "`SINK`.", "SINK.", "`SOURCE` . ", "KAFKA.SASL."]),
    space=SPACE,
)
def test_property_secret_option_values_are_always_found(
    value: str, word: str, prefix: str, space: str
) -> None:
    """Property: any value of an option whose name holds a secret word is found, in a SET
    clause or an inline connector, as text or inside JSON, and as a JSON member."""
    key = f"{prefix}{word.upper()}"
    text = f"CREATE SINK o(a INT32) TYPE Kafka SET('t' AS TOPIC,{space}'{value}'{space}AS {key})"
    assert carries_secret(text.encode()), text
    assert carries_secret(envelope(text)), text
    assert carries_secret(json.dumps({"config": {f"sink.{word}": value}}).encode())
    assert carries_secret(json.dumps([{"body": {"config": {word: value}}}]).encode())

"""Security: secrets encrypted in Temporal history and masked in every answer, Temporal
env-config profiles, message limits, identifiers and file roots.

The history checks read what Temporal stores, through the ``temporal`` CLI, as an operator
would; every base64 or zlib blob in its output is opened before searching for the secret, so
a secret that were merely encoded or compressed would still be found.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import os
import stat
import subprocess
import sys
import uuid
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import DevServer, coordinator_worker
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from streamctl import config
from streamctl.client.client import CoordinatorClient
from streamctl.client.coordinator_errors import InvalidName, InvalidRequest
from streamctl.limits import MAX_EVENTS_PER_SIGNAL
from streamctl.planner.options import (
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    ConnectorOptionError,
    normalize_sink_options,
)
from streamctl.protocol import messages as m
from streamctl.secret_options import SECRET_WORDS, redact_statement
from streamctl.worker.coordinator_worker import ensure_coordinator
from streamctl.worker.temporal_server import temporal_binary
from streamctl.workflows.payload_crypto import (
    ENCRYPTED_ENCODING,
    PayloadKeyError,
    SecretPayloadCodec,
    decrypt,
    encrypt,
    mentions_secret,
)
from streamctl.workflows.wire import ZlibCodec, connect, connect_options, data_converter

SECRET = "s3cr3t-value"
KEY = base64.b64encode(b"k" * 32).decode()
OTHER_KEY = base64.b64encode(b"o" * 32).decode()
COLUMNS = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("v", "INT64", False))


def json_payload(value: Any) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode())


# --- the codec --------------------------------------------------------------------------------


@pytest.mark.quick
@pytest.mark.parametrize(
    "text",
    [
        '{"kind":"CreateSink","body":{"config":{"password":"x"}}}',
        "CREATE SINK s(a INT32) TYPE PostgreSQL SET('x' AS `SINK`.PASSWORD)",
        '{"config":{"kafka.sasl.jaas.config":"x"}}',
        '{"url":"postgresql://alice:x@db/app"}',
        '{"config":{"SSL_KEYSTORE_PASSWORD":"x"}}',
        "SET('x' AS `SINK`.CONNINFO)",
    ],
)
def test_the_scan_finds_secrets_in_json_and_in_statement_text(text: str):
    assert mentions_secret(text.encode())


@pytest.mark.quick
@pytest.mark.parametrize(
    "text",
    [
        '{"kind":"GetSink","body":{"name":"big"}}',
        "CREATE SINK big(a INT32) TYPE File SET('/data/big' AS `SINK`.FILE_PATH)",
        '{"url":"postgresql://db/app"}',
    ],
)
def test_the_scan_leaves_ordinary_payloads_alone(text: str):
    assert not mentions_secret(text.encode())


@pytest.mark.quick
def test_every_secret_option_is_caught_by_the_scan():
    for specs in (*SOURCE_OPTIONS.values(), *SINK_OPTIONS.values()):
        for spec in specs:
            if spec.secret and spec.key != "url":  # url: by user info or a password= part
                names = (spec.key, *spec.nes_names)
                assert all(any(w in n.lower() for w in SECRET_WORDS) for n in names), spec


@pytest.mark.quick
async def test_codec_round_trips_exactly_and_encrypts_only_what_carries_a_secret():
    codec = SecretPayloadCodec(ZlibCodec(), config.parse_payload_keys(KEY))
    secret_small = json_payload({"config": {"password": SECRET}})
    secret_large = json_payload({"config": {"password": SECRET}, "pad": ["row"] * 3000})
    plain = json_payload({"name": "big"})
    plain_large = json_payload({"pad": ["row"] * 3000})
    payloads = [secret_small, secret_large, plain, plain_large]
    encoded = await codec.encode(payloads)
    encodings = [p.metadata["encoding"] for p in encoded]
    assert encodings == [ENCRYPTED_ENCODING, ENCRYPTED_ENCODING, b"json/plain", b"binary/zlib"]
    assert all(SECRET.encode() not in p.data for p in encoded)
    assert encoded[2] == plain  # readable as it was
    # Encrypted after compression: the large secret's ciphertext is far smaller than its JSON.
    assert len(encoded[1].data) < len(secret_large.data) // 5
    assert await codec.decode(encoded) == payloads


@pytest.mark.quick
async def test_a_wrong_key_is_a_clear_error_and_never_a_crash(caplog: pytest.LogCaptureFixture):
    sealed = encrypt(json_payload({"password": SECRET}), config.parse_payload_keys(KEY)[0])
    with pytest.raises(PayloadKeyError, match=r"encrypted with key [0-9a-f]{16}.*same"):
        decrypt(sealed, config.parse_payload_keys(OTHER_KEY))
    # One bit of the tag flipped (setting the last byte to 0 left it unchanged 1 time in 256).
    flipped = bytes([sealed.data[-1] ^ 1])
    tampered = Payload(metadata=sealed.metadata, data=sealed.data[:-1] + flipped)
    with pytest.raises(PayloadKeyError, match="does not authenticate"):
        decrypt(tampered, config.parse_payload_keys(KEY))
    # Through the converter, as a worker reads an argument: left encrypted, then a clear error.
    converter = data_converter(config.parse_payload_keys(OTHER_KEY))
    with pytest.raises(PayloadKeyError, match="STREAMCTL_PAYLOAD_KEY"):
        await converter.decode([sealed], [dict])
    # Key rotation: a process holding the new and the old key reads both.
    rotated = data_converter(config.parse_payload_keys(f"{OTHER_KEY},{KEY}"))
    assert await rotated.decode([sealed], [dict]) == [{"password": SECRET}]


@pytest.mark.quick
async def test_without_a_key_secrets_pass_in_plaintext_with_one_warning(
    caplog: pytest.LogCaptureFixture,
):
    codec = SecretPayloadCodec(ZlibCodec(), ())
    secret = json_payload({"password": SECRET})
    with caplog.at_level(logging.WARNING):
        assert await codec.encode([secret]) == [secret]
        assert await codec.encode([secret]) == [secret]
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "STREAMCTL_PAYLOAD_KEY" in caplog.records[0].message


# --- keys and env-config -------------------------------------------------------------------


@pytest.mark.quick
def test_payload_keys_are_checked_and_the_stack_key_file_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("STREAMCTL_PAYLOAD_KEY", raising=False)
    with pytest.raises(ValueError, match="key 1 is 5 bytes; it must be 32"):
        config.parse_payload_keys(base64.b64encode(b"short").decode())
    with pytest.raises(ValueError, match="not valid base64"):
        config.parse_payload_keys("%%%")
    assert config.payload_keys(tmp_path) == ()
    text = config.ensure_payload_key(tmp_path)
    key_file = tmp_path / config.PAYLOAD_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert config.ensure_payload_key(tmp_path) == text  # kept across restarts
    assert config.payload_keys(tmp_path) == (base64.b64decode(text),)
    monkeypatch.setenv("STREAMCTL_PAYLOAD_KEY", KEY)
    assert config.payload_keys(tmp_path) == (b"k" * 32,)


@pytest.fixture
def profile_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n")
    path = tmp_path / "temporal.toml"
    path.write_text(
        f"""
[profile.default]
address = "default.example:7233"

[profile.cloud]
address = "ns.acct.tmprl.cloud:7233"
namespace = "ns.acct"
api_key = "cloud-api-key"

[profile.cloud.tls]
server_name = "ns.acct.tmprl.cloud"
server_ca_cert_path = "{ca}"

[profile.cloud.grpc_meta]
x-team = "streams"
"""
    )
    for name in list(os.environ):
        if name.startswith("TEMPORAL_") or name in (
            "STREAMCTL_TEMPORAL_ADDRESS",
            "STREAMCTL_NAMESPACE",
            "STREAMCTL_TEMPORAL_ENV_CONFIG",
        ):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(path))
    monkeypatch.setenv("STREAMCTL_PAYLOAD_KEY", KEY)
    yield ca


@pytest.mark.quick
def test_env_config_profile_supplies_tls_api_key_address_and_namespace(
    profile_file: Path, monkeypatch: pytest.MonkeyPatch
):
    assert connect_options()["target_host"] == "default.example:7233"
    monkeypatch.setenv("TEMPORAL_PROFILE", "cloud")
    options = connect_options()
    assert options["target_host"] == "ns.acct.tmprl.cloud:7233"
    assert options["namespace"] == "ns.acct"
    assert options["api_key"] == "cloud-api-key"
    assert options["tls"].domain == "ns.acct.tmprl.cloud"
    assert options["tls"].server_root_ca_cert == profile_file.read_bytes()
    assert options["rpc_metadata"] == {"x-team": "streams"}
    assert options["data_converter"] is data_converter(config.parse_payload_keys(KEY))
    # Temporal's own variables override the file ...
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "other.acct")
    monkeypatch.setenv("TEMPORAL_API_KEY", "rotated-key")
    options = connect_options()
    assert (options["namespace"], options["api_key"]) == ("other.acct", "rotated-key")
    # ... and streamctl's explicit settings override both, TLS and API key staying.
    monkeypatch.setenv("STREAMCTL_TEMPORAL_ADDRESS", "proxy.internal:7233")
    monkeypatch.setenv("STREAMCTL_NAMESPACE", "streams")
    options = connect_options()
    assert (options["target_host"], options["namespace"]) == ("proxy.internal:7233", "streams")
    assert options["api_key"] == "rotated-key"
    options = connect_options("cli.address:7233", "cli-ns")  # --address wins over everything
    assert (options["target_host"], options["namespace"]) == ("cli.address:7233", "cli-ns")
    # The embedded stack's processes ignore profiles.
    assert "api_key" not in connect_options("127.0.0.1:7233", env_config=False)
    monkeypatch.setenv("STREAMCTL_TEMPORAL_ENV_CONFIG", "0")
    assert "tls" not in connect_options("127.0.0.1:7233")


@pytest.mark.quick
def test_a_broken_profile_file_is_a_clear_error(profile_file: Path):
    Path(os.environ["TEMPORAL_CONFIG_FILE"]).write_text("[profile.default\naddress=")
    with pytest.raises(ValueError, match="Temporal environment configuration"):
        connect_options()


# --- masking in statement text ---------------------------------------------------------------


@pytest.mark.quick
def test_statement_text_is_redacted_for_answers():
    text = (
        "SELECT id FROM src INTO PostgreSQL('t' AS `SINK`.TABLE, 'pw''x' AS `SINK`.PASSWORD, "
        "'postgresql://u:pw@h/db' AS `SINK`.URL, 42 AS `SINK`.`PASSWORD`)"
    )
    redacted = redact_statement(text)
    assert "pw" not in redacted and "42" not in redacted
    assert "'t' AS `SINK`.TABLE" in redacted and "'***' AS `SINK`.PASSWORD" in redacted


@pytest.mark.quick
def test_an_invalid_secret_is_refused_without_echoing_it():
    with pytest.raises(ConnectorOptionError) as refused:
        normalize_sink_options("POSTGRESQL", {"table": "t", "dbname": "d", "password": "  "})
    assert "'password'" in str(refused.value) and "'  '" not in str(refused.value)


# --- a real coordinator with a payload key ------------------------------------------------------


@pytest.fixture
async def keyed_coordinator(
    temporal: DevServer, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Client, str]]:
    monkeypatch.setenv("STREAMCTL_PAYLOAD_KEY", KEY)
    client = await connect(temporal.address)
    suffix = uuid.uuid4().hex[:10]
    task_queue, workflow_id = f"coordinator-{suffix}", f"coordinator-sec-{suffix}"
    async with coordinator_worker(client, sqlite_url, task_queue):
        await ensure_coordinator(client, workflow_id=workflow_id, task_queue=task_queue)
        yield client, workflow_id


@contextlib.asynccontextmanager
async def asking(address: str, workflow_id: str) -> AsyncIterator[CoordinatorClient]:
    coordinator = await CoordinatorClient(address, workflow_id=workflow_id).connect()
    try:
        yield coordinator
    finally:
        await asyncio.to_thread(coordinator.close)


def _opened(value: Any) -> Iterator[bytes]:
    """Every string of the CLI's JSON, and whatever its base64 or zlib form holds."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _opened(item)
    elif isinstance(value, list):
        for item in value:
            yield from _opened(item)
    elif isinstance(value, str):
        yield value.encode()
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return
        yield raw
        start = raw.find(b"\x78")  # a zlib stream's first byte
        with contextlib.suppress(zlib.error):
            raw = zlib.decompress(raw[start:]) if start >= 0 else b""
        yield raw


def workflow_history_bytes(address: str, workflow_id: str) -> bytes:
    shown = subprocess.run(
        [temporal_binary(), "workflow", "show", "--workflow-id", workflow_id,
         "--address", address, "--output", "json"],
        capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    return shown.stdout + b"\n".join(_opened(json.loads(shown.stdout)))


POSTGRES_CONFIG = {"table": "out", "dbname": "app", "user": "writer", "password": SECRET}


@pytest.mark.slow
async def test_secrets_are_absent_from_history_and_masked_in_every_answer(
    keyed_coordinator: tuple[Client, str], temporal: DevServer
):
    _client, workflow_id = keyed_coordinator
    async with asking(temporal.address, workflow_id) as coordinator:
        await coordinator.ask(m.CreateSink("typed_pg", COLUMNS, "PostgreSQL", POSTGRES_CONFIG))
        created = await coordinator.ask(
            m.ExecuteStatement(
                "CREATE LOGICAL SOURCE events(id UINT64 NOT NULL, v INT64 NOT NULL);"
                "CREATE PHYSICAL SOURCE FOR events TYPE Kafka SET('broker:9092' AS BROKERS, "
                f"'t' AS TOPIC, 'alice' AS sasl_username, '{SECRET}' AS sasl_password);"
                "CREATE SINK stmt_pg(id UINT64 NOT NULL, v INT64 NOT NULL) TYPE PostgreSQL "
                f"SET('out' AS `SINK`.TABLE, 'app' AS `SINK`.DATABASE, '{SECRET}' AS "
                "`SINK`.PASSWORD);"
            )
        )
        assert [s["statement"] for s in created["statements"]] == [
            "CREATE LOGICAL SOURCE",
            "CREATE PHYSICAL SOURCE",
            "CREATE SINK",
        ], created
        answers = [
            await coordinator.ask(m.GetSink("typed_pg")),
            await coordinator.ask(m.GetSink("STMT_PG")),
            await coordinator.ask(m.ListSinks()),
            await coordinator.ask(m.ListPhysicalSources()),
            await coordinator.ask(m.ExecuteStatement("SHOW SINKS; SHOW PHYSICAL SOURCES")),
        ]
    answers.append(created)
    for answer in answers:
        text = json.dumps(answer)
        assert SECRET not in text and '"***"' in text, text
    assert answers[0]["config"]["password"] == "***"
    assert answers[0]["config"]["user"] == "writer"  # other options stay visible

    history = await asyncio.to_thread(workflow_history_bytes, temporal.address, workflow_id)
    assert SECRET.encode() not in history
    assert base64.b64encode(ENCRYPTED_ENCODING) in history  # encrypted, not just missing
    assert b"typed_pg" in history  # the GetSink request stayed readable

    # streamctl's own output, as a script reads it.
    shown = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "streamctl.cli", "sql", "SHOW SINKS", "--json",
         "--workflow-id", workflow_id],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "STREAMCTL_TEMPORAL_ADDRESS": temporal.address},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "STMT_PG" in shown.stdout and "***" in shown.stdout
    assert SECRET not in shown.stdout + shown.stderr


# --- limits and identifiers -------------------------------------------------------------------


@pytest.mark.slow
async def test_bad_names_and_oversized_event_batches_are_refused(
    keyed_coordinator: tuple[Client, str], temporal: DevServer
):
    client, workflow_id = keyed_coordinator
    handle = client.get_workflow_handle(workflow_id)
    async with asking(temporal.address, workflow_id) as coordinator:
        for request in (
            m.CreateSink("bad-name", COLUMNS, "Void"),
            m.CreateLogicalSource("9lives", COLUMNS),
            m.ExecuteStatement("CREATE WORKER `w x` SET(2 AS CAPACITY)"),
        ):
            with pytest.raises((InvalidName, InvalidRequest), match="valid identifier"):
                await coordinator.ask(request)
        oversized = [
            m.RegisterWorker(f"big_{i}").to_envelope(f"e{i}")
            for i in range(MAX_EVENTS_PER_SIGNAL + 1)
        ]
        await handle.signal("events", m.EventBatch("raw-sender", 1, oversized))
        await handle.signal(
            "events", m.EventBatch("raw-sender", 2, [m.RegisterWorker("ok_w").to_envelope("e")])
        )
        for _ in range(100):
            names = {w["name"] for w in await coordinator.ask(m.ListWorkers())}
            if "ok_w" in names:
                break
            await asyncio.sleep(0.1)
        assert names == {"ok_w"}
    with pytest.raises(ValueError, match="max_events_per_signal"):
        CoordinatorClient(temporal.address, max_events_per_signal=MAX_EVENTS_PER_SIGNAL + 1)


@pytest.mark.quick
def test_inline_sinks_are_confined_to_the_file_roots(tmp_path: Path):
    from streamctl.domain.context import RequestFailed
    from streamctl.domain.paths import confined_path

    with pytest.raises(RequestFailed, match="outside the directories"):
        confined_path("/etc/cron.d/job", "the inline FILE sink's")
    assert confined_path("out/x", "the inline FILE sink's").startswith(str(config.files_dir()))

"""Property: the payload codec never raises on what arrives, however corrupt.

A codec runs on every payload of a workflow activation before any workflow code: an exception
there fails the activation, and the retry fails the same way, so one corrupt payload from a
raw caller (a signal or update with ``binary/zlib`` or ``binary/encrypted`` encoding and
garbage data) would stop the coordinator for good. Decoding must instead leave such a payload
as it is, to be refused where its value is read (a dropped signal, a rejected update). On
f29f918 a corrupt compressed payload, and an encrypted one shorter than its nonce under a key
the worker holds, raised out of ``decode``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload

from streamctl.workflows.payload_crypto import (
    ENCRYPTED_ENCODING,
    KEY_ID_METADATA,
    encrypt,
    key_id,
)
from streamctl.workflows.wire import ZLIB_ENCODING, data_converter

KEY = bytes(range(32))
CODEC = data_converter((KEY,)).payload_codec
assert CODEC is not None


def _payloads(data: st.DataObject) -> Payload:
    kind = data.draw(st.sampled_from(["zlib", "encrypted", "tampered", "foreign", "plain"]))
    raw = data.draw(st.binary(max_size=200))
    if kind == "zlib":
        return Payload(metadata={"encoding": ZLIB_ENCODING}, data=raw)
    if kind == "encrypted":
        return Payload(
            metadata={"encoding": ENCRYPTED_ENCODING, KEY_ID_METADATA: key_id(KEY).encode()},
            data=raw,
        )
    if kind == "tampered":
        sealed = encrypt(Payload(metadata={"encoding": b"json/plain"}, data=b"{}"), KEY)
        flip = data.draw(st.integers(0, len(sealed.data) - 1))
        altered = bytearray(sealed.data)
        altered[flip] ^= 0xFF
        cut = data.draw(st.integers(0, len(altered)))
        return Payload(metadata=dict(sealed.metadata), data=bytes(altered[:cut]))
    if kind == "foreign":
        return Payload(
            metadata={"encoding": ENCRYPTED_ENCODING, KEY_ID_METADATA: b"someone-else"}, data=raw
        )
    return Payload(metadata={"encoding": b"json/plain"}, data=raw)


@pytest.mark.quick
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_decoding_never_raises(data: st.DataObject) -> None:
    payloads = [_payloads(data) for _ in range(data.draw(st.integers(1, 4)))]
    decoded = asyncio.run(CODEC.decode(payloads))
    assert len(decoded) == len(payloads)


@pytest.mark.quick
def test_an_intact_payload_still_round_trips() -> None:
    original = Payload(metadata={"encoding": b"json/plain"}, data=b'{"password": "x"}' * 400)
    encoded = asyncio.run(CODEC.encode([original]))
    assert asyncio.run(CODEC.decode(encoded)) == [original]


SANDBOXED_NEIGHBOUR = """
import sys, threading
from temporalio.api.common.v1 import Payload
from temporalio.worker.workflow_sandbox._importer import _thread_local_sys_modules
from streamctl.workflows.payload_crypto import decrypt, encrypt
applied, done = threading.Event(), threading.Event()

def workflow_thread():
    # What a coordinator worker's workflow thread does while it runs an activation.
    with _thread_local_sys_modules.applied(sys, "modules", dict(sys.modules)):
        applied.set()
        done.wait(60)

threading.Thread(target=workflow_thread, daemon=True).start()
applied.wait(60)
key = bytes(range(32))
inner = Payload(metadata={"encoding": b"json/plain"}, data=b'{"password": "x"}')
assert decrypt(encrypt(inner, key), (key,)) == inner
done.set()
print("ok")
"""


def test_a_payload_is_encrypted_while_another_thread_runs_in_the_workflow_sandbox() -> None:
    """A client decrypting next to a coordinator worker (one process, as in `streamctl up`
    and the tests): while a workflow thread has the sandbox applied, ``sys.modules`` is not a
    dict, and cryptography imported on first use then raised SystemError ("bad argument to
    internal function"), failing the request (CI, stop 32's test_client_deadlines)."""
    run = subprocess.run(
        [sys.executable, "-c", SANDBOXED_NEIGHBOUR], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]

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


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_decoding_never_raises(data: st.DataObject) -> None:
    payloads = [_payloads(data) for _ in range(data.draw(st.integers(1, 4)))]
    decoded = asyncio.run(CODEC.decode(payloads))
    assert len(decoded) == len(payloads)


def test_an_intact_payload_still_round_trips() -> None:
    original = Payload(metadata={"encoding": b"json/plain"}, data=b'{"password": "x"}' * 400)
    encoded = asyncio.run(CODEC.encode([original]))
    assert asyncio.run(CODEC.decode(encoded)) == [original]

"""Encryption of payloads that carry secrets, so that Temporal history never holds them in clear.

Protocol
--------
Every process connects through :func:`streamctl.workflows.wire.connect`, whose data converter
ends in :class:`SecretPayloadCodec`. On encode, each payload is checked for a secret with a
byte-level scan (:func:`mentions_secret`): a case-insensitive search for the option-name words
of :data:`~streamctl.planner.connectors.options.SECRET_WORDS` (``password``, ``jaas``,
``token`` ...) and for a URL with user info (``postgresql://user:pw@host``). The scan sees the
JSON as it travels, so it catches a secret wherever it hides: a ``CreateSink`` config, the text
of an ``ExecuteStatement`` (``SET('hunter2' AS `SINK`.PASSWORD)``), a pass input or result, an
agent's ``start_query`` action. A payload that mentions one is compressed first (the inner
codec, :class:`~streamctl.workflows.wire.ZlibCodec`: ciphertext does not compress) and then
encrypted whole with AES-256-GCM: encoding ``binary/encrypted``, metadata ``encryption-key-id``
(the first 8 bytes of the key's SHA-256, in hex), data ``nonce (12 bytes) || ciphertext+tag``
of the serialized inner payload, with :data:`AAD` as associated data. Every other payload is
left to the inner codec and stays readable JSON in the Web UI. The scan is conservative: a
masked answer (``"password": "***"``) or a query over a column named ``token`` is encrypted
too, which costs readability, never a secret.

Keys come from :func:`streamctl.config.payload_keys` (``STREAMCTL_PAYLOAD_KEY`` or the state
dir's ``payload.key``). The first key encrypts; every key decrypts (rotation: add the new key
in front, drop the old one once histories written with it have closed).

Guarantees
----------
* Decoding is exact: ``decode(encode(p)) == p`` byte for byte, with or without compression.
* Without a key, payloads with secrets travel in clear; the process logs one warning and never
  fails for it.
* A payload this process cannot decrypt (no key, another key, tampered data) is left encrypted
  by the codec, and :class:`EncryptedPayloadConverter` turns it into a
  :class:`PayloadKeyError` naming the key id it needs when a value is read from it. So a
  client with the wrong key gets a refused update or a dropped signal, never a failed
  workflow task (decoding an activation must not raise, or the coordinator would retry the
  task forever). :func:`decrypt` is the strict form, for tools and tests.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import EncodingPayloadConverter, PayloadCodec

from streamctl.planner.connectors.options import SECRET_WORDS

log = logging.getLogger(__name__)

ENCRYPTED_ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
AAD = b"streamctl payload v1"
NONCE_BYTES = 12

_WORDS = tuple(word.encode() for word in SECRET_WORDS)
_USERINFO_URL = re.compile(rb"://[^/@\s\"'`,;]+@")


class PayloadKeyError(ValueError):
    """A payload that this process cannot decrypt; the message says which key it needs."""


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def mentions_secret(data: bytes) -> bool:
    """Whether ``data`` names a secret option or holds a URL with user info.

    ``bytes.lower`` and ``in`` run at memory speed, so a 1 MB request batch costs well under a
    millisecond per word; the URL regex runs only when ``://`` occurs at all.
    """
    lowered = data.lower()
    if any(word in lowered for word in _WORDS):
        return True
    return b"://" in lowered and _USERINFO_URL.search(lowered) is not None


def _aesgcm(key: bytes) -> Any:
    # Imported here: this module is imported wherever the wire module is, the workflow
    # sandbox included, and the codec itself never runs there.
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


def encrypt(payload: Payload, key: bytes) -> Payload:
    nonce = os.urandom(NONCE_BYTES)
    sealed = _aesgcm(key).encrypt(nonce, payload.SerializeToString(), AAD)
    return Payload(
        metadata={"encoding": ENCRYPTED_ENCODING, KEY_ID_METADATA: key_id(key).encode()},
        data=nonce + sealed,
    )


def decrypt(payload: Payload, keys: Sequence[bytes]) -> Payload:
    """The inner payload of an encrypted one; :class:`PayloadKeyError` if no key fits."""
    wanted = payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace")
    key = next((k for k in keys if key_id(k) == wanted), None)
    if key is None:
        held = ", ".join(key_id(k) for k in keys) or "none"
        raise PayloadKeyError(
            f"payload is encrypted with key {wanted or '?'}; this process holds key(s) {held}: "
            "give every streamctl process the same STREAMCTL_PAYLOAD_KEY"
        )
    from cryptography.exceptions import InvalidTag

    data = payload.data
    try:
        plain = _aesgcm(key).decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], AAD)
    except InvalidTag:
        raise PayloadKeyError(
            f"payload encrypted with key {wanted} does not authenticate (altered or truncated)"
        ) from None
    inner = Payload()
    inner.ParseFromString(plain)
    return inner


class SecretPayloadCodec(PayloadCodec):
    """Encrypts payloads that mention a secret, around an inner codec (compression)."""

    def __init__(self, inner: PayloadCodec, keys: Sequence[bytes]) -> None:
        self.inner = inner
        self.keys = tuple(keys)
        self._warned = threading.Event()

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        secret = [mentions_secret(p.data) for p in payloads]
        encoded = await self.inner.encode(payloads)
        if not any(secret):
            return encoded
        if not self.keys:
            self._warn_once()
            return encoded
        return [
            encrypt(p, self.keys[0]) if is_secret else p
            for p, is_secret in zip(encoded, secret, strict=True)
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        opened: list[Payload] = []
        for payload in payloads:
            if payload.metadata.get("encoding") == ENCRYPTED_ENCODING:
                try:
                    payload = decrypt(payload, self.keys)
                except PayloadKeyError as error:
                    # Left encrypted: EncryptedPayloadConverter reports it where the value is
                    # read, so bad input never fails a workflow activation.
                    log.warning("%s", error)
            opened.append(payload)
        return await self.inner.decode(opened)

    def _warn_once(self) -> None:
        if not self._warned.is_set():
            self._warned.set()
            log.warning(
                "a payload carries a secret (a password, credential or URL with user info) "
                "but no payload key is configured, so Temporal history holds it in plaintext; "
                "set STREAMCTL_PAYLOAD_KEY (base64 of 32 bytes) for every streamctl process"
            )


class EncryptedPayloadConverter(EncodingPayloadConverter):
    """Reads a payload the codec could not decrypt as a clear :class:`PayloadKeyError`."""

    @property
    def encoding(self) -> str:
        return ENCRYPTED_ENCODING.decode()

    def to_payload(self, value: Any) -> Payload | None:
        return None  # never chosen to encode: the codec encrypts

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        wanted = payload.metadata.get(KEY_ID_METADATA, b"?").decode(errors="replace")
        raise PayloadKeyError(
            f"cannot read a payload encrypted with key {wanted}: this process does not hold "
            "that key (give every streamctl process the same STREAMCTL_PAYLOAD_KEY)"
        )

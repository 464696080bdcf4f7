"""Encryption of payloads that carry secrets, so that Temporal history never holds them in clear.

Protocol
--------
Every process connects through :func:`streamctl.workflows.wire.connect`, whose data converter
ends in :class:`SecretPayloadCodec`. On encode, each payload is checked for a secret with a
byte-level scan (:func:`mentions_secret`) of the JSON as it travels, so it catches a secret
wherever it hides: a ``CreateSink`` config, the text of an ``ExecuteStatement``, a pass input or
result, an agent's ``start_query`` action. A payload carries a secret when, case-insensitively,

* it holds a URL with user info (``postgresql://user:pw@host``), or
* a word of :data:`~streamctl.secret_options.SECRET_WORDS` (``password``,
  ``jaas``, ``token`` ...) is part of an option's *name*: a JSON member name (``"password":``,
  ``"kafka.sasl.jaas.config":``, also in JSON nested in a string), or the key of a statement
  option after a literal (``'hunter2' AS `SINK`.PASSWORD``, ``42 AS sasl_password``), or
* a secret word is a parameter of a connection string (``password=pw``) in a payload that
  names a URL option (``url``, ``CONNECTION_URL``: secret options whose names hold no word).

A secret word used as an identifier (a column ``password``, ``SELECT token FROM s``, ``WHERE
password = 'x'``, ``CREATE LOGICAL SOURCE s(KEY UINT64, PASSWORD VARSIZED)``, a schema's
``"name": "password"``) is not a secret, and such payloads stay readable. A payload that
mentions one is compressed first (the inner
codec, :class:`~streamctl.workflows.wire.ZlibCodec`: ciphertext does not compress) and then
encrypted whole with AES-256-GCM: encoding ``binary/encrypted``, metadata ``encryption-key-id``
(the first 8 bytes of the key's SHA-256, in hex), data ``nonce (12 bytes) || ciphertext+tag``
of the serialized inner payload, with :data:`AAD` as associated data. Every other payload is
left to the inner codec and stays readable JSON in the Web UI. The scan errs towards
encrypting: a masked answer (``"password": "***"``) or a literal aliased to a secret word
(``SELECT 'x' AS token``) is encrypted too, which costs readability, never a secret.

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
  task forever); a client reading a raw answer asks :func:`encrypted_with` and raises its
  own typed error. :func:`decrypt` is the strict form, for tools and tests.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Sequence
from typing import Any

# Imported with this module, never on first use: cryptography's Rust extension registers
# itself in ``sys.modules`` as a dict, and while any thread of the process runs a workflow in
# Temporal's sandbox, ``sys.modules`` is the sandbox's thread-local mapping instead, so a
# first import then (a client decrypting an answer next to a coordinator worker) raised
# "SystemError: Objects/dictobject.c: bad argument to internal function".
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import EncodingPayloadConverter, PayloadCodec

from streamctl.secret_options import SECRET_WORDS, URL_SECRET_OPTIONS

log = logging.getLogger(__name__)

ENCRYPTED_ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
AAD = b"streamctl payload v1"
NONCE_BYTES = 12

_WORDS = tuple(word.encode() for word in SECRET_WORDS)
_WORD = re.compile(b"|".join(re.escape(word) for word in _WORDS))
_USERINFO_URL = re.compile(rb"://[^/@\s\"'`,;]+@")

# The name checks read backwards from a secret word: ``before`` is the text before the word,
# reversed, so each check is an anchored match of bounded length (a search for an ending
# ``\Z`` would try every start and cost ~60 µs a word).
_KEY_PART = rb"(?:`[^`]{0,128}`|[a-z0-9_$]{1,128})"
_WS_REVERSED = rb"(?:\s|[nrtf]\\)"
"""Whitespace, also as JSON escapes (a statement's newline travels as ``\n``), reversed."""
_IN_MEMBER_NAME = (
    # Before the word (reversed): the rest of the name up to its opening quote.
    re.compile(rb'[^"\\]{0,256}"'),
    # After it: the rest of the name, its closing quote (escaped in nested JSON), a colon.
    re.compile(rb'[^"\\]{0,256}\\*"\s*:'),
)
_IN_OPTION_KEY = re.compile(
    # An option of a SET(...) or inline-connector list, reversed: ``(`` or ``,``, a literal
    # (quoted, '' escapes included, or a number), AS, then the key path up to the word
    # (``, 'x' AS `SINK`.PASS`` + ``WORD``). A quoted literal longer than the look-back
    # counts too. A select list's ``expr AS word`` is no option.
    rb"(?:[^`]{0,128}`|[a-z0-9_$]{0,128})"  # the key's part that holds the word
    + rb"(?:\s*\.\s*"
    + _KEY_PART
    + rb")*"  # the parts before it
    + _WS_REVERSED
    + rb"+sa"
    + _WS_REVERSED
    + rb"+(?:"
    + rb"""(?:(?:'[^']*')+|"\\*[^"\\]*"\\*|[0-9a-z_.]{0,64}[0-9][-+]?)"""
    + _WS_REVERSED
    + rb"*[(,]"
    + rb"""|'[^']*\Z|"[^"]*\Z)"""
)
_LOOK_BACK = 512
"""Bytes before a word that the name checks look at (names and key paths are shorter)."""


def _url_option_names() -> tuple[bytes, ...]:
    """Names of secret options without a secret word (``url``, ``connection_url``): their
    credentials are a URL's user info or a ``password=`` parameter of their value."""
    return tuple(sorted(name.encode() for name in URL_SECRET_OPTIONS))


_URL_OPTION = re.compile(
    # A member ``"url":`` or an option key ``AS `SINK`.URL``, read forwards.
    rb'\\*"(?:'
    + b"|".join(_url_option_names())
    + rb')\\*"\s*:|\bas'
    + rb"(?:\s|\\[nrtf])+"
    + rb"(?:"
    + _KEY_PART
    + rb"\s*\.\s*)*`?(?:"
    + b"|".join(_url_option_names())
    + rb")\b"
)


class PayloadKeyError(ValueError):
    """A payload that this process cannot decrypt; the message says which key it needs
    (``key_id``; None when the key is there but the payload does not authenticate)."""

    def __init__(self, message: str, key_id: str | None = None) -> None:
        super().__init__(message)
        self.key_id = key_id


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def encrypted_with(payload: Payload) -> str | None:
    """The id of the key ``payload`` is encrypted with (``'?'`` if unnamed); None if it is not
    encrypted (any more: the codec decrypts what it can)."""
    if payload.metadata.get("encoding") != ENCRYPTED_ENCODING:
        return None
    return payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace") or "?"


def mentions_secret(data: bytes) -> bool:
    """Whether ``data`` holds a secret option's value or a URL with user info (see the module
    docstring for the rules).

    ``bytes.lower`` and ``in`` run at memory speed, so a 1 MB request batch without a secret
    word costs well under a millisecond per word; the regexes run only around the words found
    (a bounded look-back each) and when ``://`` occurs at all.
    """
    lowered = data.lower()
    if b"://" in lowered and _USERINFO_URL.search(lowered) is not None:
        return True
    if not any(word in lowered for word in _WORDS):
        return False
    names_url_option: bool | None = None  # looked up once, when first needed
    for found in _WORD.finditer(lowered):
        start, end = found.span()
        before = lowered[max(0, start - _LOOK_BACK) : start][::-1]
        if _IN_MEMBER_NAME[0].match(before) and _IN_MEMBER_NAME[1].match(lowered, end):
            return True
        if _IN_OPTION_KEY.match(before):
            return True
        if lowered[end : end + 1] == b"=":
            if names_url_option is None:
                names_url_option = _URL_OPTION.search(lowered) is not None
            if names_url_option:
                return True
    return False


def encrypt(payload: Payload, key: bytes) -> Payload:
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(key).encrypt(nonce, payload.SerializeToString(), AAD)
    return Payload(
        metadata={"encoding": ENCRYPTED_ENCODING, KEY_ID_METADATA: key_id(key).encode()},
        data=nonce + sealed,
    )


def decrypt(payload: Payload, keys: Sequence[bytes]) -> Payload:
    """The inner payload of an encrypted one; :class:`PayloadKeyError` if no key fits."""
    wanted = encrypted_with(payload) or "?"
    key = next((k for k in keys if key_id(k) == wanted), None)
    if key is None:
        held = ", ".join(key_id(k) for k in keys) or "none"
        raise PayloadKeyError(
            f"payload is encrypted with key {wanted}; this process holds key(s) {held}: "
            "give every streamctl process the same STREAMCTL_PAYLOAD_KEY",
            wanted,
        )
    data = payload.data
    try:
        plain = AESGCM(key).decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], AAD)
        inner = Payload()
        inner.ParseFromString(plain)
    except (InvalidTag, ValueError, DecodeError):
        # ValueError: shorter than a nonce. Every way a payload can be corrupt must end here:
        # an exception escaping the codec would fail the workflow activation on every retry.
        raise PayloadKeyError(
            f"payload encrypted with key {wanted} does not authenticate (altered or truncated)"
        ) from None
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
        wanted = encrypted_with(payload) or "?"
        raise PayloadKeyError(
            f"cannot read a payload encrypted with key {wanted}: this process does not hold "
            "that key (give every streamctl process the same STREAMCTL_PAYLOAD_KEY)",
            wanted,
        )

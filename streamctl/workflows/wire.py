"""The wire format of everything that crosses Temporal: one data converter for every process.

Every client, coordinator worker and agent connects with :func:`connect`, so all of them agree
on two things the default converter does differently:

* **Dataclasses convert without reflection.** The default JSON converter resolves a
  dataclass's type hints on every value it decodes (``typing.get_type_hints``, which evaluates
  string annotations each time) and deep-copies with ``dataclasses.asdict`` on every encode.
  Measured on the coordinator worker under load, that was half of its CPU. Here each dataclass
  gets a decoder built once from its resolved hints, and encoding is a shallow field read.
  The JSON is the same as the default converter's, so histories stay readable and a worker
  without this module still understands them.
* **Large payloads are compressed** (zlib, encoding ``binary/zlib``) by a payload codec. A
  request crosses history four times (update argument, pass input, pass result, update
  result); uncompressed, a 5,000 requests/s load fills the 4 MiB at which Temporal suggests
  continue-as-new every second. Payloads under :data:`COMPRESS_ABOVE` bytes stay plain JSON,
  so small messages remain readable in the Web UI.
* **Payloads that carry secrets are encrypted** (AES-256-GCM, encoding ``binary/encrypted``)
  after compression, when a payload key is configured: see
  :mod:`streamctl.workflows.payload_crypto` for the protocol and its guarantees.

:func:`connect` also applies Temporal's environment configuration (TLS, API key, gRPC
metadata; address and namespace unless given): see :mod:`streamctl.config`.

Decoding is strict where it matters for bad input: a value of the wrong shape for a dataclass
raises, which Temporal turns into a rejected update or a dropped signal, never a failed
workflow task.
"""

from __future__ import annotations

import dataclasses
import logging
import types
import typing
import zlib
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    AdvancedJSONEncoder,
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    JSONTypeConverter,
    PayloadCodec,
    value_to_type,
)
from temporalio.runtime import Runtime

from streamctl import config
from streamctl.compact_json import loads
from streamctl.limits import MAX_ID_LENGTH
from streamctl.protocol.messages import Envelope, EventBatch, field_names
from streamctl.workflows.payload_crypto import EncryptedPayloadConverter, SecretPayloadCodec

log = logging.getLogger(__name__)

COMPRESS_ABOVE = 4096
"""Payloads at least this large (encoded JSON bytes) are compressed."""

ZLIB_ENCODING = b"binary/zlib"

Decoder = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


class _Decoders:
    """A decoder per type hint, built on first use from the resolved hints, then cached."""

    def __init__(self) -> None:
        self._by_hint: dict[Any, Decoder] = {}

    def dataclass_decoder(self, cls: type) -> Decoder:
        decoder = self._by_hint.get(cls)
        if decoder is None:
            decoder = self._build_dataclass(cls)
            self._by_hint[cls] = decoder
        return decoder

    def for_hint(self, hint: Any) -> Decoder:
        try:
            decoder = self._by_hint.get(hint)
        except TypeError:  # unhashable hint
            return lambda value: value_to_type(hint, value)
        if decoder is None:
            decoder = self._build(hint)
            self._by_hint[hint] = decoder
        return decoder

    def _build(self, hint: Any) -> Decoder:
        if hint in (Any, str, int, bool, type(None), object):
            return _identity
        if hint is float:
            return lambda value: float(value) if isinstance(value, int) else value
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            return self.dataclass_decoder(hint)
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin in (list, Sequence) and len(args) == 1:
            item = self.for_hint(args[0])
            if item is _identity:
                return _checked_list
            return lambda value: [item(element) for element in _checked_list(value)]
        if origin is dict and len(args) == 2 and args[0] is str:
            if args[1] is Any:
                # Bodies and results: any JSON passes here; the pass activity checks bodies
                # and answers a bad one with a per-request error instead of refusing the batch.
                return _identity
            item = self.for_hint(args[1])
            if item is _identity:
                return _checked_dict
            return lambda value: {k: item(v) for k, v in _checked_dict(value).items()}
        if origin in (typing.Union, types.UnionType):
            options = [a for a in args if a is not type(None)]
            if len(options) == 1:
                inner = self.for_hint(options[0])
                return lambda value: None if value is None else inner(value)
            if all(self.for_hint(a) is _identity for a in options):
                return _identity
        return lambda value: value_to_type(hint, value)

    def _build_dataclass(self, cls: type) -> Decoder:
        hints = typing.get_type_hints(cls)
        plan = [(f.name, self.for_hint(hints[f.name])) for f in dataclasses.fields(cls) if f.init]
        name = cls.__qualname__

        def decode(value: Any) -> Any:
            if not isinstance(value, dict):
                raise TypeError(f"{name} must be a JSON object, got {type(value).__name__}")
            unknown = value.keys() - {field for field, _ in plan}
            if unknown:
                raise TypeError(f"{name} has unknown field(s) {sorted(unknown)}")
            return cls(
                **{field: convert(value[field]) for field, convert in plan if field in value}
            )

        return decode


def _checked_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a JSON array, got {type(value).__name__}")
    return value


def _checked_dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


_DECODERS = _Decoders()


def decode_event_batch(args: Sequence[Any]) -> tuple[EventBatch | None, str]:
    """The ``events`` signal's argument decoded strictly, or None and why it was dropped.

    The signal handler takes its arguments raw (any number of them), because Temporal calls a
    typed handler with however many arguments a raw caller sent, and a handler that raises
    fails the workflow task. Envelopes that cannot be ordered and compacted (an id or a kind
    that is not a string) are left out one by one."""
    if len(args) != 1:
        return None, f"the events signal takes one EventBatch, got {len(args)} arguments"
    value = args[0]
    try:
        batch = _DECODERS.dataclass_decoder(EventBatch)(value)
    except Exception as error:
        return None, f"not an EventBatch: {error}"
    if not isinstance(batch.sender, str) or not batch.sender:
        return None, "an event batch needs a non-empty string sender"
    if not isinstance(batch.seq, int) or isinstance(batch.seq, bool):
        return None, "an event batch needs an integer seq"
    if not isinstance(batch.events, list):
        return None, "an event batch's events must be a list"
    envelopes: list[Any] = batch.events  # decoded as Envelopes with the batch
    kept = [e for e in envelopes if isinstance(e, Envelope) and _orderable(e)]
    dropped = len(envelopes) - len(kept)
    return (
        EventBatch(batch.sender[:MAX_ID_LENGTH], batch.seq, kept),
        f"{dropped} malformed event(s) left out" if dropped else "",
    )


def request_batch_problem(ids: Sequence[Any], data: bytes) -> str | None:
    """Why a ``submit`` update's payload does not match its ids, or None.

    Checked by the update's validator, before the batch enters history: the payload must be a
    JSON array with one envelope per id, in the same order. The pass answers each request by
    the id inside its envelope, so a batch whose ids and envelopes disagree (in number or
    order) could never be answered as its caller expects."""
    try:
        envelopes = loads(data)
    except Exception as error:  # not JSON, or nested beyond what a parser takes
        return f"the request batch is not valid JSON: {str(error)[:200]}"
    if not isinstance(envelopes, list):
        return "the request batch must be a JSON array of envelopes"
    if len(envelopes) != len(ids):
        return f"the request batch has {len(envelopes)} envelopes for {len(ids)} ids"
    for position, (envelope, request_id) in enumerate(zip(envelopes, ids, strict=True)):
        # An envelope without a string id is the pass's to refuse, with its own answer.
        carried = envelope.get("id") if isinstance(envelope, dict) else None
        if isinstance(carried, str) and carried != request_id:
            return (
                f"envelope {position} of the request batch carries id {carried!r}, "
                f"not {request_id!r}"
            )
    return None


def request_batch_kinds(data: bytes) -> frozenset[str]:
    """The envelope kinds of a request batch that :func:`request_batch_problem` accepted."""
    return frozenset(
        envelope["kind"]
        for envelope in loads(data)
        if isinstance(envelope, dict) and isinstance(envelope.get("kind"), str)
    )


def nests_deeper_than(value: Any, limit: int) -> bool:
    """Whether lists and objects nest in ``value`` more than ``limit`` levels deep; found
    iteratively, so no depth of input can make the check itself overflow the stack."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _orderable(envelope: Envelope) -> bool:
    """Whether the workflow can buffer and compact it (its id and kind are strings); the rest
    of an envelope is the pass's to judge, so that histories from before this check replay."""
    return isinstance(envelope.id, str) and isinstance(envelope.kind, str)


class FastDataclassConverter(JSONTypeConverter):
    """Decodes every hint with a prebuilt decoder (Temporal's own for hints it does not know).

    Lists are strict: a string where a list is expected is an error, not a list of characters.
    """

    def to_typed_value(self, hint: type, value: Any) -> Any | None:
        return _DECODERS.for_hint(hint)(value)


class ShallowDataclassEncoder(AdvancedJSONEncoder):
    """Encodes a dataclass as the dict of its fields without copying nested values first."""

    def default(self, o: Any) -> Any:
        cls = type(o)
        if not hasattr(cls, "__dataclass_fields__"):
            return super().default(o)
        return {name: getattr(o, name) for name in field_names(cls)}


class WirePayloadConverter(CompositePayloadConverter):
    """Temporal's default converters, with the JSON one using the fast paths above."""

    def __init__(self) -> None:
        json_converter = JSONPlainPayloadConverter(
            encoder=ShallowDataclassEncoder,
            custom_type_converters=[FastDataclassConverter()],
        )
        super().__init__(
            *(
                json_converter if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            ),
            EncryptedPayloadConverter(),
        )


class ZlibCodec(PayloadCodec):
    """Compresses payloads of :data:`COMPRESS_ABOVE` bytes or more; passes the rest through."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        encoded: list[Payload] = []
        for payload in payloads:
            if payload.ByteSize() < COMPRESS_ABOVE:
                encoded.append(payload)
                continue
            encoded.append(
                Payload(
                    metadata={"encoding": ZLIB_ENCODING},
                    data=zlib.compress(payload.SerializeToString(), 1),
                )
            )
        return encoded

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded: list[Payload] = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ZLIB_ENCODING:
                decoded.append(payload)
                continue
            try:
                inner = Payload()
                inner.ParseFromString(zlib.decompress(payload.data))
            except Exception as error:  # zlib.error, protobuf's DecodeError
                # A codec that raises fails the whole workflow activation, again on every
                # retry: a raw caller's corrupt payload would stop the coordinator. Left as it
                # is, it fails only where its value is read (a dropped signal, a rejected update).
                log.warning("leaving a corrupt %s payload undecoded: %s", ZLIB_ENCODING, error)
                decoded.append(payload)
                continue
            decoded.append(inner)
        return decoded


@lru_cache(maxsize=8)
def data_converter(payload_keys: tuple[bytes, ...] = ()) -> DataConverter:
    """The wire format; payloads with secrets are encrypted with the first of ``payload_keys``
    (none: they stay plain, with one warning)."""
    return DataConverter(
        payload_converter_class=WirePayloadConverter,
        payload_codec=SecretPayloadCodec(ZlibCodec(), payload_keys),
    )


def connect_options(
    address: str | None = None,
    namespace: str | None = None,
    payload_keys: tuple[bytes, ...] | None = None,
    env_config: bool = True,
) -> dict[str, Any]:
    """The keyword arguments of ``Client.connect``: Temporal's env-config profile (TLS, API
    key, gRPC metadata, address, namespace; skipped when ``env_config`` is false) under the
    explicit ``address``/``namespace`` and streamctl's own settings
    (``STREAMCTL_TEMPORAL_ADDRESS``, ``STREAMCTL_NAMESPACE``)."""
    profile = config.temporal_profile() if env_config else None
    options: dict[str, Any] = dict(profile.to_client_connect_config()) if profile else {}
    options["target_host"] = address or config.temporal_address()
    options["namespace"] = namespace or config.namespace()
    keys = config.payload_keys() if payload_keys is None else payload_keys
    options["data_converter"] = data_converter(keys)
    return options


async def connect(
    address: str | None = None,
    namespace: str | None = None,
    runtime: Runtime | None = None,
    *,
    payload_keys: tuple[bytes, ...] | None = None,
    env_config: bool = True,
) -> Client:
    """A Temporal client speaking the coordinator's wire format (see :func:`connect_options`;
    ``payload_keys`` default to :func:`streamctl.config.payload_keys`); ``runtime`` (default:
    the SDK's) is where the SDK's metrics of this client and its workers go."""
    return await Client.connect(
        **connect_options(address, namespace, payload_keys, env_config), runtime=runtime
    )

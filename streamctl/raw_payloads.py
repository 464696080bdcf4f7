"""JSON that crosses Temporal as it is: raw payloads the converter neither parses nor builds.

Request batches travel this way (the ``submit`` update's argument, the pass's ``requests``, the
update's result): the workflow joins and forwards them byte for byte and never parses a body,
so a body costs the workflow nothing and a malformed one can fail only its own request.
"""

from __future__ import annotations

from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue

JSON_ENCODING = b"json/plain"
"""The encoding Temporal's JSON converter gives plain JSON payloads."""


def json_payload(data: bytes) -> RawValue:
    """``data`` (JSON text) as a payload Temporal passes on unparsed."""
    return RawValue(Payload(metadata={"encoding": JSON_ENCODING}, data=data))


def join_request_batches(batches: list[Payload]) -> RawValue:
    """The JSON array of the given JSON payloads, without parsing any of them."""
    return json_payload(b"[" + b",".join(batch.data for batch in batches) + b"]")

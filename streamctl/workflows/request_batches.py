"""Request batches as the workflow holds them until a pass answers: one ``submit`` update's
requests, raw (the workflow never parses a body), and how a failed pass's messages are split in
halves until the one that fails alone is found (:func:`halves`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from temporalio.api.common.v1 import Payload

from streamctl.compact_json import dumps, loads
from streamctl.protocol.pass_io import PendingMessage
from streamctl.raw_payloads import JSON_ENCODING


@dataclass(eq=False)
class RequestBatch:
    """One ``submit`` update's requests, raw, until a pass answers them."""

    ids: list[str]
    payload: Payload
    received_at: float
    seq: int = 0
    """Its arrival number (:attr:`streamctl.protocol.pass_io.PassInput.request_batch_seqs`)."""
    answer: str | None = None
    whole: RequestBatch | None = None
    """The batch this one is a part of, when a failing pass was split inside a batch."""
    parts: list[RequestBatch] = field(default_factory=list)
    part_answers: dict[int, str] = field(default_factory=dict)

    def split(self) -> tuple[RequestBatch, RequestBatch]:
        """Two parts of this batch (it must hold two requests or more)."""
        envelopes = loads(self.payload.data)
        middle = len(self.ids) // 2
        self.parts = [
            RequestBatch(
                ids,
                Payload(metadata={"encoding": JSON_ENCODING}, data=dumps(part).encode()),
                self.received_at,
                self.seq,
                whole=self,
            )
            for ids, part in (
                (self.ids[:middle], envelopes[:middle]),
                (self.ids[middle:], envelopes[middle:]),
            )
        ]
        return self.parts[0], self.parts[1]

    def part_answered(self, part: RequestBatch, answer: str) -> RequestBatch | None:
        """Record a part's answer; the outermost batch once all of its parts are answered."""
        index = next(i for i, candidate in enumerate(self.parts) if candidate is part)
        self.part_answers[index] = answer
        if len(self.part_answers) < len(self.parts):
            return None
        combined = dumps(
            [item for i in range(len(self.parts)) for item in loads(self.part_answers[i])]
        )
        if self.whole is not None:
            return self.whole.part_answered(self, combined)
        self.answer = combined
        return self


def halves(
    request_batches: list[RequestBatch], events: list[PendingMessage]
) -> list[tuple[list[RequestBatch], list[PendingMessage]]]:
    """The messages of a failed pass in two non-empty halves; none for a single message."""
    middle = len(events) // 2
    if len(request_batches) >= 2:
        cut = len(request_batches) // 2
        return [
            (request_batches[:cut], events[:middle]),
            (request_batches[cut:], events[middle:]),
        ]
    if len(request_batches) == 1 and len(request_batches[0].ids) >= 2:
        left, right = request_batches[0].split()
        return [([left], events[:middle]), ([right], events[middle:])]
    if request_batches and events:
        return [(request_batches, []), ([], events)]
    if len(events) >= 2:
        return [([], events[:middle]), ([], events[middle:])]
    return []


def only_envelope(batch: RequestBatch) -> tuple[Any, Any]:
    """The kind and body of a one-request batch's envelope, as far as it has them."""
    try:
        [envelope] = loads(batch.payload.data)
    except Exception:
        return "", batch.payload.data[:1000]
    if not isinstance(envelope, dict):
        return "", envelope
    return envelope.get("kind", ""), envelope.get("body")

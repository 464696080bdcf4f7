"""Which event batches the coordinator has taken in, by sender: the ``events`` signal's
de-duplication.

Protocol
--------
Every event batch (:class:`~streamctl.protocol.messages.EventBatch`) names its sender and a
``seq`` that grows with each batch that sender sends. The workflow remembers, per sender, the
highest ``seq`` taken in and when it last heard from it, in two maps of the carried state
(``CoordinatorState.sender_seqs`` and ``sender_seen_at``, which :class:`SenderMemory` works on
in place). A batch whose ``seq`` is not above its sender's is one delivered before (a signal
the client sent again) and is dropped.

Guarantees
----------
* A batch is taken in at most once per sender while the sender is remembered.
* The memory is bounded, so the carried state fits its payload: with
  :data:`~streamctl.workflows.patches.BOUNDED_SENDER_MEMORY`, the senders take at most
  :data:`~streamctl.limits.MAX_CARRIED_SENDER_BYTES` as JSON writes them (the least recently
  heard is forgotten first; by time, since the maps' order does not survive continue-as-new,
  whose JSON sorts their keys), and a ``seq`` beyond 64 bits is refused
  (:func:`seq_fits`). Before continue-as-new, senders not heard for
  :data:`SENDER_MEMORY_SECONDS` are forgotten (:meth:`SenderMemory.forget_older_than`).
* A forgotten sender's next batch is taken as new, so only a batch it sends again after that
  long could count twice.

Deterministic: it reads only its arguments; the workflow hands it the time and whether the run
has the patch (asked only when it matters: ``workflow.patched`` writes its marker where it is
first asked). The bound is read from :mod:`streamctl.limits` when used, as the workflow's own
file, imported afresh for every run, read it.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from streamctl import limits
from streamctl.limits import INT64_MAX, INT64_MIN

SENDER_MEMORY_SECONDS = 24 * 3600.0
"""A sender not heard for this long is forgotten when the run continues as new."""


def sender_bytes(sender: str) -> int:
    """What one remembered sender takes in the carried state at most: its name in both maps as
    JSON writes it (escaped: six bytes for a control character, twelve for an emoji), with a
    64-bit number or a timestamp each and the punctuation around them."""
    return 2 * (len(json.dumps(sender)) + 32)


def seq_fits(seq: int) -> bool:
    """Whether a batch number fits 64 bits (what
    :data:`~streamctl.limits.MAX_CARRIED_SENDER_BYTES` counts): one of thousands of digits would
    make the carried state outgrow its payload."""
    return INT64_MIN <= seq <= INT64_MAX


class SenderMemory:
    """The highest batch number taken in per sender, and when each sender was last heard."""

    def __init__(
        self, seqs: dict[str, int], seen_at: dict[str, float], bounded: Callable[[], bool]
    ) -> None:
        self.seqs = seqs
        """``CoordinatorState.sender_seqs``, updated in place."""
        self.seen_at = seen_at
        """``CoordinatorState.sender_seen_at``, updated in place."""
        self._bounded = bounded
        """Whether the run bounds the memory (its patch); asked only for a new sender."""
        self._bytes: int | None = None
        """What the memory takes (:func:`sender_bytes`), once counted."""

    def delivered_before(self, sender: str, seq: int) -> bool:
        """Whether ``sender``'s batch ``seq`` was taken in already (or an earlier one)."""
        return seq <= self.seqs.get(sender, 0)

    def remember(self, sender: str, seq: int, now: float) -> None:
        """Note ``sender``'s batch ``seq`` heard at ``now``, within
        :data:`~streamctl.limits.MAX_CARRIED_SENDER_BYTES` in a bounded run: past it, the
        sender heard from least recently is forgotten."""
        seqs, seen_at = self.seqs, self.seen_at
        known = sender in seen_at
        seqs[sender] = seq
        seen_at[sender] = now
        if known or not self._bounded():
            return
        if self._bytes is None:
            self._bytes = sum(sender_bytes(name) for name in seen_at)
        else:
            self._bytes += sender_bytes(sender)
        while self._bytes > limits.MAX_CARRIED_SENDER_BYTES and len(seen_at) > 1:
            oldest = min(seen_at, key=seen_at.__getitem__)
            del seen_at[oldest]
            seqs.pop(oldest, None)
            self._bytes -= sender_bytes(oldest)

    def forget_older_than(self, horizon: float) -> None:
        """Forget the senders last heard before ``horizon``."""
        for sender, seen in list(self.seen_at.items()):
            if seen < horizon:
                self.seen_at.pop(sender, None)
                self.seqs.pop(sender, None)
        self._bytes = None

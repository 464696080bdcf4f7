"""What the reference engine raises besides a result.

* :class:`ReferenceUnsupported` -- the reference cannot say what NebulaStream answers (the
  plan uses something it does not translate, or the data reaches a case that the NES
  documentation leaves open, such as a float division by zero or a float converted to an
  integer out of range). It never answers such a case differently instead.
* :class:`NesQueryFailure` -- NebulaStream documents that the query fails on this data (an
  integer division or modulo by a non-null zero, ``null_handling.md``).
"""

from __future__ import annotations


class ReferenceUnsupported(Exception):
    """The reference cannot compute NebulaStream's answer; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NesQueryFailure(Exception):
    """NebulaStream fails the query on this input; ``reason`` names the documented rule."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

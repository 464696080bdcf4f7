"""Listings, whole or one page at a time (the ``List*`` requests and ``SHOW``).

Protocol (:mod:`streamctl.protocol.messages`, "Listings are paged on request"): a listing
without ``limit`` answers every item in key order. With ``limit`` it answers a
:class:`~streamctl.protocol.answers.Page`: the first items with a key above ``after`` (all
keys when it is absent), at most ``limit`` of them and fewer once their size reaches
``MAX_PAGE_BYTES`` (one at least), and ``next``, the last item's key, when more may follow.

Guarantees: paging reads the catalog in key order only as far as the page needs (a page of
10 items of 100,000 rows reads about 11 rows), so its cost does not grow with the table; every
item that exists throughout a walk from the first page to the last is answered exactly once;
and a page always fits in one answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, TypeVar

from streamctl.catalog.view import EntityMap
from streamctl.domain.context import RequestFailed
from streamctl.domain.decode import body_size
from streamctl.error_codes import ErrorCode
from streamctl.limits import MAX_PAGE_BYTES, MAX_PAGE_ROWS
from streamctl.protocol import answers

__all__ = ["check_page", "listing", "page_of"]

R = TypeVar("R")
J = TypeVar("J")


def check_page(limit: int | None, after: Any, what: str) -> None:
    """Refuse a ``limit`` outside ``1..MAX_PAGE_ROWS``, and a cursor without a limit
    (``INVALID_REQUEST``)."""
    if limit is not None and not 1 <= limit <= MAX_PAGE_ROWS:
        raise RequestFailed(
            ErrorCode.INVALID_REQUEST,
            f"{what}: limit must be from 1 to {MAX_PAGE_ROWS} items a page, got {limit}",
        )
    if after is not None and limit is None:
        raise RequestFailed(
            ErrorCode.INVALID_REQUEST,
            f"{what}: after (the cursor of a page) goes with limit (the size of the page)",
        )


def listing(
    rows: EntityMap[Any, Any],
    limit: int | None,
    after: Any,
    to_json: Callable[[Any], J],
    what: str,
) -> list[J] | answers.Page:
    """The whole table in key order (no ``limit``), or one page of it."""
    check_page(limit, after, what)
    if limit is None:
        key = rows.key_column.name
        return [to_json(row) for row in sorted(rows.all(), key=lambda row: getattr(row, key))]
    # One row more than asked tells whether another page follows.
    return page_of(rows.page(after, limit + 1), limit, to_json, attrgetter(rows.key_column.name))


def page_of(
    ordered: Sequence[R], limit: int, to_json: Callable[[R], Any], key: Callable[[R], Any]
) -> answers.Page:
    """The page of ``ordered`` (rows from the cursor on, in key order, possibly more than
    ``limit``): its first items up to ``limit`` and ``MAX_PAGE_BYTES``, and ``next``."""
    items: list[Any] = []
    size = 0
    for row in ordered[:limit]:
        item = to_json(row)
        size += body_size(item)
        if items and size > MAX_PAGE_BYTES:
            break
        items.append(item)
    more = len(items) < len(ordered)
    return {"items": items, "next": key(ordered[len(items) - 1]) if more else None}

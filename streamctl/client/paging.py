"""Walking a paged listing from the first page to the last, for every frontend.

Protocol (:mod:`streamctl.protocol.messages`, "Listings are paged on request"): a frontend
asks a ``List*`` request with ``limit`` and gets ``{"items", "next"}``; while ``next`` is not
None it asks the same request with ``after=next``
(:meth:`~streamctl.client.client.CoordinatorClient.list_all` does). An ``ExecuteStatement``
whose text is one ``SHOW``, sent with ``limit``, answers one page and ``next``, the cursor of
the following page (the same text with ``after=next``); :func:`complete_show_pages` follows
those until the last page and gives back the answer with every row. (A ``SHOW`` among other
statements is not paged: it lists every row where it stands in the script.)

Every page is one request with its own deadline, so a listing of any length is answered
without any single answer nearing the payload limits; a listing that changes while it is
walked answers each object that exists throughout exactly once (the cursor is a key).

The functions here only build requests and merge answers; the caller sends them, blocking or
async.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final, TypeVar

from streamctl.limits import MAX_PAGE_ROWS
from streamctl.protocol import answers
from streamctl.protocol import messages as m

__all__ = ["PAGE_ROWS", "complete_show_pages", "first_page", "next_page"]

PAGE_ROWS: Final = 500
"""Items a frontend asks for per page (the coordinator takes up to ``MAX_PAGE_ROWS``)."""

L = TypeVar("L", bound=m.Request)


def first_page(request: L, limit: int = PAGE_ROWS) -> L:
    """The request for the first page of the ``List*`` request ``request``."""
    if request.kind not in m.PAGE_KEYS:
        raise ValueError(f"{request.kind} is not a paged listing ({', '.join(m.PAGE_KEYS)})")
    if type(limit) is not int or not 1 <= limit <= MAX_PAGE_ROWS:
        raise ValueError(f"a page holds 1 to {MAX_PAGE_ROWS} items, not {limit!r}")
    return replace(request, limit=limit, after=None)  # type: ignore[call-arg]


def next_page(request: L, page: dict[str, Any]) -> L | None:
    """The request for the page after ``page`` (the answer to ``request``); None after the
    last."""
    if page["next"] is None:
        return None
    if page["next"] == getattr(request, "after", None):  # a cursor that does not advance
        raise RuntimeError(f"{request.kind}: the page after {page['next']!r} names itself next")
    return replace(request, after=page["next"])  # type: ignore[call-arg]


def complete_show_pages(
    ask: Callable[[m.Request], Any], request: m.ExecuteStatement, answer: dict[str, Any]
) -> dict[str, Any]:
    """``answer`` (to ``request``, an ``ExecuteStatement`` sent with ``limit``) with the
    following pages of its ``SHOW`` asked for through the blocking ``ask`` and appended; its
    ``next`` is None afterwards. Only a text that is one ``SHOW`` is paged."""
    result = answers.lone_show(answer)
    while result is not None and result.get("next") is not None:
        following = answers.lone_show(ask(replace(request, after=result["next"])))
        assert following is not None, "the next page of a lone SHOW answers a lone SHOW"
        result["rows"].extend(following["rows"])
        result["next"] = following["next"]
    return answer

"""Comparing a query's result rows with a system test's expectation.

Rows compare as a multiset (order does not matter). Values are NebulaStream's text: numbers
match with a relative tolerance of 1e-5 (an absolute one of 1e-6 near zero), ``NULL`` only
matches ``NULL``, booleans ignore case, text must be equal.
"""

from __future__ import annotations

import math
import re

Row = list[str | None]

SHOWN_ROWS = 5
"""How many missing and unexpected rows a difference names."""


def split_expected_row(row: str, width: int) -> Row:
    """An expected row as written in a ``.test`` file: ``,``-separated, or by whitespace."""
    for parts in (row.split(","), row.split()):
        if len(parts) == width:
            return [None if p.strip() == "NULL" else p for p in parts]
    return [row]


def values_match(expected: str | None, actual: str | None, type_name: str) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    if type_name in ("FLOAT32", "FLOAT64") or re.fullmatch(r"U?INT\d+", type_name):
        try:
            a, b = float(expected.strip()), float(actual.strip())
        except ValueError:
            return expected.strip() == actual.strip()
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)
    if type_name == "BOOLEAN":
        return expected.strip().lower() == actual.strip().lower()
    return expected == actual


def compare_rows(expected: list[Row], actual: list[Row], types: list[str]) -> str:
    """``""`` when both hold the same rows; otherwise a readable difference."""
    remaining = list(actual)
    missing = []
    for row in expected:
        for index, candidate in enumerate(remaining):
            if len(candidate) == len(row) and all(
                values_match(e, a, t) for e, a, t in zip(row, candidate, types, strict=False)
            ):
                del remaining[index]
                break
        else:
            missing.append(row)
    if not missing and not remaining:
        return ""
    more_missing = "..." if len(missing) > SHOWN_ROWS else ""
    more_unexpected = "..." if len(remaining) > SHOWN_ROWS else ""
    return (
        f"{len(expected)} expected rows, {len(actual)} actual; "
        f"missing {missing[:SHOWN_ROWS]}{more_missing}; "
        f"unexpected {remaining[:SHOWN_ROWS]}{more_unexpected}"
    )

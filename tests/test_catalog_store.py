"""The catalog store's bulk operations on generated data, on both catalogs.

``bulk_insert`` writes what it is given: generated rows written (COPY's text format on
PostgreSQL, an executemany on SQLite) and read back through SQLAlchemy are the same rows.
``one_of`` finds exactly the rows whose key is one of the keys asked for (one bound parameter
on PostgreSQL), whatever the keys hold: text one character wider than its column, integers
beyond a 32-bit column's range.

The values are those a pass writes and worse: text with COPY's special characters (backslash,
tab, newline, carriage return), text that looks like COPY's NULL (``\\N``), non-ASCII text,
NULLs mixed into any column, integers at their column's bounds, floats of every magnitude, and
JSON documents holding all of these.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    select,
)
from sqlalchemy.orm import Session

from streamctl.catalog.store import bulk_insert, create_catalog_engine, key_chunks, one_of
from streamctl.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

METADATA = MetaData()
ROWS = Table(
    "bulk_rows",
    METADATA,
    Column("seq", Integer, primary_key=True),
    Column("name", String(40), nullable=True),
    Column("note", Text, nullable=True),
    Column("big", BigInteger, nullable=True),
    Column("small", Integer, nullable=True),
    Column("ratio", Float, nullable=True),
    Column("flag", Boolean, nullable=True),
    Column("doc", JSON, nullable=True),
)

SPECIALS = ("\\", "\t", "\n", "\r")
"""COPY's special characters: a table draws which of them its text holds (a column holding
only one of them must be escaped as well as one holding all)."""


def texts(specials: list[str]) -> st.SearchStrategy[str]:
    """Text PostgreSQL can hold (no NUL, no lone surrogate), with these of :data:`SPECIALS`."""
    plain = st.characters(exclude_categories=("Cs",), exclude_characters="\x00\\\t\n\r")
    return st.one_of(
        st.text(
            alphabet=st.one_of(st.sampled_from([*specials, "N", ",", '"', "{", "}", " "]), plain),
            max_size=12,
        ),
        st.sampled_from(["\\N", "NULL", "", "\\\\N"] if "\\" in specials else ["NULL", ""]),
    )


def json_values(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(INT64_MIN, INT64_MAX),
            st.floats(allow_nan=False, allow_infinity=False),
            text,
        ),
        lambda children: st.one_of(
            st.lists(children, max_size=3), st.dictionaries(text, children, max_size=3)
        ),
        max_leaves=8,
    )


def _column(values: st.SearchStrategy[Any], nulls: bool) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values) if nulls else values


@st.composite
def tables(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows of one shape; each column drawn with or without NULLs, as a pass's columns are."""
    nulls = {name: draw(st.booleans()) for name in ("name", "note", "big", "small", "ratio")}
    text = texts(sorted(draw(st.sets(st.sampled_from(SPECIALS)))))
    count = draw(st.integers(1, 12))
    strategies = {
        "name": _column(text.map(lambda value: value[:40]), nulls["name"]),
        "note": _column(text, nulls["note"]),
        "big": _column(
            st.one_of(st.integers(INT64_MIN, INT64_MAX), st.sampled_from([INT64_MIN, INT64_MAX])),
            nulls["big"],
        ),
        "small": _column(st.integers(INT32_MIN, INT32_MAX), nulls["small"]),
        "ratio": _column(st.floats(allow_nan=False, allow_infinity=False), nulls["ratio"]),
        "flag": st.one_of(st.none(), st.booleans()),
        "doc": json_values(text),
    }
    return [
        {"seq": seq, **{name: draw(strategy) for name, strategy in strategies.items()}}
        for seq in range(count)
    ]


def _same(written: Any, read: Any) -> bool:
    if isinstance(written, float) and isinstance(read, float):
        return written == read or (math.isclose(written, read, rel_tol=1e-15) and written != 0)
    return bool(written == read)


@pytest.fixture
def engine(catalog_url):
    engine = create_catalog_engine(catalog_url)
    METADATA.create_all(engine)
    yield engine
    engine.dispose()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=tables())
def test_rows_read_back_as_written(engine, rows):
    with Session(engine) as session, session.begin():
        session.execute(ROWS.delete())
        bulk_insert(session, ROWS, rows)
    with Session(engine) as session:
        read = [dict(row._mapping) for row in session.execute(select(ROWS).order_by(ROWS.c.seq))]
    assert len(read) == len(rows)
    for written, back in zip(rows, read, strict=True):
        for name, value in written.items():
            assert _same(value, back[name]), (name, value, back[name])


KEYED = Table(
    "keyed_rows",
    METADATA,
    Column("name", String(40), primary_key=True),
    Column("number", BigInteger, nullable=False),
    Column("small", Integer, nullable=False),
)


@pytest.mark.quick
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    stored=st.dictionaries(
        st.one_of(
            texts(list(SPECIALS)).map(lambda value: value[:40]),
            # Names as wide as the column: asked for with one more character, they must not
            # match (a cast of the keys to the column's VARCHAR(40) would cut them to these).
            texts(list(SPECIALS)).map(lambda value: value[:40].ljust(40, "p")),
        ),
        st.one_of(
            st.integers(INT64_MIN, INT64_MAX),
            st.sampled_from([INT32_MIN - 1, INT32_MIN, INT32_MAX, INT32_MAX + 1]),
        ),
        max_size=12,
    ),
    asked=st.lists(texts(list(SPECIALS)).map(lambda value: value[:40]), max_size=6),
    numbers=st.lists(
        st.one_of(
            st.integers(INT64_MIN, INT64_MAX),
            st.sampled_from([INT32_MIN - 1, INT32_MIN, INT32_MAX, INT32_MAX + 1]),
        ),
        max_size=6,
    ),
    data=st.data(),
)
def test_one_of_finds_exactly_the_keys_asked_for(engine, stored, asked, numbers, data):
    names = (
        asked + data.draw(st.lists(st.sampled_from(sorted(stored)), max_size=6))
        if stored
        else asked
    )
    names += [name + data.draw(texts([]).filter(bool)) for name in stored if len(name) == 40]
    wanted = numbers + [stored[name] for name in names if name in stored][:3]
    with Session(engine) as session, session.begin():
        session.execute(KEYED.delete())
        bulk_insert(
            session,
            KEYED,
            [{"name": k, "number": v, "small": _small(v)} for k, v in stored.items()],
        )
    with Session(engine) as session:
        found_names = {
            name
            for chunk in key_chunks(session, names)
            for name in session.scalars(
                select(KEYED.c.name).where(one_of(session, KEYED.c.name, chunk))
            )
        }
        found_numbers = {
            number
            for chunk in key_chunks(session, wanted)
            for number in session.scalars(
                select(KEYED.c.number).where(one_of(session, KEYED.c.number, chunk))
            )
        }
        found_smalls = {
            small
            for chunk in key_chunks(session, wanted)
            for small in session.scalars(
                select(KEYED.c.small).where(one_of(session, KEYED.c.small, chunk))
            )
        }
    assert found_names == set(names) & set(stored)
    assert found_numbers == set(wanted) & set(stored.values())
    assert found_smalls == set(wanted) & {_small(v) for v in stored.values()}


def _small(number: int) -> int:
    """A 64-bit number folded into 32 bits (as often as not the number itself)."""
    return number if INT32_MIN <= number <= INT32_MAX else number % INT32_MAX

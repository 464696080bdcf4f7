"""Opening a catalog: engine set-up for SQLite and PostgreSQL, and schema migrations.

A catalog URL is either a SQLAlchemy URL (``sqlite:///path.db``,
``postgresql+psycopg://user@host/db``) or a plain ``postgresql://`` URL, which is read as
psycopg 3. SQLite gets foreign keys switched on and WAL journaling so readers (``streamctl``,
tests) never block the pass; PostgreSQL connections are checked before use so a restarted
server costs one failed pass attempt, which Temporal retries.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from operator import itemgetter
from pathlib import Path
from typing import Any, cast

from alembic import command
from alembic.config import Config
from sqlalchemy import (
    JSON,
    BigInteger,
    ColumnElement,
    Engine,
    Integer,
    String,
    Table,
    Text,
    any_,
    bindparam,
    create_engine,
    event,
    func,
    insert,
    select,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from streamctl.catalog.fit import check_rows_fit, text_problem
from streamctl.catalog.urls import normalize_url
from streamctl.compact_json import dumps, loads
from streamctl.limits import INT64_MAX, INT64_MIN

_MIGRATIONS_INI = Path(__file__).with_name("alembic.ini")
_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def _enable_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


_PLANNED_FOR_THE_VALUES_GIVEN = {"prepare_threshold": None}
"""psycopg's connection options for the catalog: no statement of ours is prepared, so each is
planned for the values it is given.

psycopg prepares a statement on its fifth execution in a connection, and PostgreSQL may then
plan it once for any parameters (a generic plan). Planned while a new catalog's tables are
empty, that plan is a sequential scan, kept while they grow: the pass's look-up of 2,000
request ids in 60,000 stored answers then takes seconds. Not preparing costs a parse per
execution (the statements are planned per execution either way). Forcing custom plans for the
whole connection instead (``plan_cache_mode = force_custom_plan``) would also re-plan
PostgreSQL's own foreign-key checks, one per row a pass deletes or inserts: 19 ms instead of
5 ms in a pass dropping 533 logical sources. See docs/decisions.md."""


def create_catalog_engine(url: str) -> Engine:
    """A new engine for ``url`` (not cached; callers own and dispose it)."""
    url = normalize_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url, connect_args={"timeout": 30}, json_serializer=dumps, json_deserializer=loads
        )
        event.listen(engine, "connect", _enable_sqlite_pragmas)
        return engine
    engine = create_engine(
        url,
        pool_pre_ping=True,
        pool_size=4,
        max_overflow=4,
        pool_recycle=300,
        json_serializer=dumps,
        json_deserializer=loads,
        connect_args=_PLANNED_FOR_THE_VALUES_GIVEN,
    )
    return engine


def catalog_engine(url: str) -> Engine:
    """The process-wide engine for ``url``, created and migrated on first use."""
    with _engines_lock:
        engine = _engines.get(url)
        if engine is None:
            engine = create_catalog_engine(url)
            migrate(engine)
            _engines[url] = engine
        return engine


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest migration (idempotent)."""
    config = Config(str(_MIGRATIONS_INI))
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # Two coordinator workers starting together must not race on the schema.
            connection.exec_driver_sql("SELECT pg_advisory_xact_lock(727001)")
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def bulk_insert(session: Session, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` (all with the same keys) into ``table`` in the session's transaction.

    On PostgreSQL this is one ``COPY ... FROM STDIN``: the pass writes a response and a
    changelog row per request, and an executemany costs a round trip per row (half the pass at
    2,000 requests). Elsewhere it is an executemany, which SQLite runs in-process.
    """
    if not rows:
        return
    check_rows_fit(table, rows)
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        session.execute(insert(table), rows)
        return
    columns = list(rows[0])
    json_columns = {c.name for c in table.columns if isinstance(c.type, JSON)}
    quote = connection.dialect.identifier_preparer.quote
    statement = f"COPY {quote(table.name)} ({', '.join(quote(c) for c in columns)}) FROM STDIN"
    driver_connection = connection.connection.driver_connection
    assert driver_connection is not None
    texts = [_copy_column(list(map(itemgetter(c), rows)), c in json_columns) for c in columns]
    with driver_connection.cursor() as cursor, cursor.copy(statement) as copy:
        copy.write("\n".join(map("\t".join, zip(*texts, strict=True))) + "\n")


# COPY's text format, written here rather than by psycopg's per-value dumpers, which would be
# most of the time a pass spends sending its rows: a row is its values joined by tabs, NULL is \N,
# and backslash, tab, newline and carriage return are escaped. A pass writes thousands of rows
# of a few columns, so each column is written at once, by the types it holds: a column of
# plain text or numbers takes no Python call per value.

_COPY_SPECIAL = ("\\", "\t", "\n", "\r")


def _copy_column(values: list[Any], json_column: bool) -> list[str]:
    """The COPY texts of one column's ``values`` (JSON text for a JSON column, where None is
    the JSON null, as the ORM writes it)."""
    if json_column:
        return _escaped([dumps(value) for value in values])
    kinds = {type(value) for value in values}
    if kinds == {str}:
        return _escaped(values)
    if kinds == {int} or kinds == {float}:
        return list(map(str, values))  # repr round-trips a float; nan and inf are accepted
    if kinds == {str, type(None)}:
        texts = _escaped([value for value in values if value is not None])
        it = iter(texts)
        return ["\\N" if value is None else next(it) for value in values]
    return [_copy_value(value) for value in values]


def _escaped(texts: list[str]) -> list[str]:
    joined = "".join(texts)  # the special characters are single ones: joining makes none
    if not any(special in joined for special in _COPY_SPECIAL):
        return texts
    return [_copy_text(text) for text in texts]


def _copy_text(text: str) -> str:
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text


def _copy_value(value: Any) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, str):
        return _copy_text(value)
    if isinstance(value, bool):
        return "t" if value else "f"
    return str(value)  # int, float (repr round-trips; nan and inf are accepted as such)


IN_LIST_LIMIT = 500
"""Keys per ``IN`` list where the database has no array parameters (SQLite)."""


def key_chunks(session: Session, keys: Iterable[Any]) -> Iterator[list[Any]]:
    """``keys`` in lists for :func:`one_of`: all at once on PostgreSQL (one bound parameter),
    in lists of :data:`IN_LIST_LIMIT` elsewhere (one bound parameter per key)."""
    keys = list(keys)
    if session.get_bind().dialect.name == "postgresql":
        if keys:
            yield keys
        return
    for start in range(0, len(keys), IN_LIST_LIMIT):
        yield keys[start : start + IN_LIST_LIMIT]


JSON_KEYS_LIMIT = 5_000
"""Keys up to which :func:`one_of` binds them as one JSON array (:func:`_json_keys`)."""


def one_of(session: Session, column: Any, values: Iterable[Any]) -> ColumnElement[bool]:
    """``column IN values`` for a batch of keys, as one bound parameter on PostgreSQL; for an
    indexed column (a key, or a column with an index of its own).

    ``IN (:v1, ..., :v500)`` is a new statement text for every batch size, which psycopg parses
    again each time (a few milliseconds per query at 500 keys); one bound parameter is one text.
    Up to :data:`JSON_KEYS_LIMIT` keys of the column's own kind (text for a text column,
    64-bit integers for an integer one) are bound as one JSON array whose elements the server
    reads as a set, ``column IN (SELECT ...)`` (:func:`_json_keys`); others as a bound array.
    Keys are compared with a text column as text, never cut to its width (a longer key
    matches nothing).

    The set, not ``= ANY(ARRAY(SELECT ...))``: the planner does not see how many keys that
    array holds, and on a table it takes for small (a few hundred rows, or statistics from when
    it was) it scans the table comparing each row with every key (1,318 sinks times 2,978
    keys: 93 ms for one look-up). A set is joined: hashed against a scan of a small table, or
    looked up key by key in the index of a large one.
    """
    values = list(values)
    if session.get_bind().dialect.name == "postgresql":
        keys = _json_keys(column, values)
        if keys is not None:
            return cast("ColumnElement[bool]", column.in_(_elements_of(keys, column)))
        return cast(
            "ColumnElement[bool]",
            column
            == any_(bindparam(None, values, type_=postgresql.ARRAY(_key_type(column, False)))),
        )
    return cast("ColumnElement[bool]", column.in_(values))


def _json_keys(column: Any, values: list[Any]) -> str | None:
    """``values`` as one JSON array, where there are at most :data:`JSON_KEYS_LIMIT` of them
    and they are all text (storable: no NUL, no lone surrogate) for a text column or all
    64-bit integers for an integer column; None otherwise.

    On PostgreSQL 15, looking up 2,000 keys in a 100,000-row primary key takes 17-19 ms with a
    bound array (psycopg writes it element by element, and the planner estimates a constant
    array's selectivity element by element, then chooses a sequential scan) and 5-7 ms with
    the JSON text (an index scan). A pass looks up its request ids and the names its messages
    touch this way, several such queries each. The planner takes the JSON array for about 100
    keys whatever it holds, so for 100,000 keys it would look a large table's index up key by
    key (358 ms) where the bound array's hashed sequential scan takes 51 ms: hence the
    limit."""
    if not values or len(values) > JSON_KEYS_LIMIT:
        return None
    kinds = {type(value) for value in values}
    if (
        isinstance(column.type, Integer)
        and kinds == {int}
        and min(values) >= INT64_MIN
        and max(values) <= INT64_MAX
    ):
        return dumps(values)
    if (
        isinstance(column.type, String)
        and kinds == {str}
        and all(text_problem(value) is None for value in values)
    ):
        return dumps(values)
    return None


def _elements_of(keys: str, column: Any) -> Any:
    """``SELECT`` of the elements of the JSON array ``keys``, typed as :func:`_key_type`."""
    elements = func.json_array_elements_text(sql_cast(bindparam(None, keys, type_=Text()), JSON))
    return select(sql_cast(elements, _key_type(column, True)))


def _key_type(column: Any, from_json: bool) -> Any:
    """The type keys are compared with ``column`` as: text for a text column, not its
    ``VARCHAR(n)``, whose cast would cut a longer key to ``n`` characters and then match
    another key; 64-bit integers for the JSON form's integer keys; else the column's own."""
    if isinstance(column.type, String):
        return Text()
    if from_json and isinstance(column.type, Integer):
        return BigInteger()
    return column.type


def dispose_all() -> None:
    with _engines_lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()

"""The catalog's lookups keep using their indexes as the catalog grows (PostgreSQL).

psycopg prepares a statement on its fifth execution in a connection, and PostgreSQL then
plans a prepared statement once for any parameters (a generic plan) when that looks no dearer
than the plans it made for the values given. A new coordinator's first passes run while its
tables are empty, where a sequential scan is the cheapest plan of all, and that plan stayed
in force while the tables grew: every pass's look-up of its request ids (``request_id =
ANY($1)`` on ``responses``) compared each stored answer with each id of the pass. Found by
``bench requests``: now and then (until autovacuum re-analyzed the table) passes took seconds
and throughput fell from ~6,500 to ~2,100 requests/s. The catalog's statements are therefore
not prepared (:mod:`streamctl.catalog.store`); forcing custom plans for the whole connection
instead made PostgreSQL plan its foreign-key checks again for every row.
"""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.orm import Session
from test_pass_activity import run_pass

from streamctl.activities.pass_activity import CatalogWork
from streamctl.catalog.models import LogicalSource
from streamctl.catalog.store import catalog_engine, one_of
from streamctl.protocol import messages as m

SCHEMA = (m.ColumnSpec("id", "UINT64", False),)


def test_lookups_are_planned_for_their_values_not_once_for_an_empty_table(pg_url: str) -> None:
    work = CatalogWork(pg_url)
    run_pass(work, 1, [m.CreateLogicalSource("s", SCHEMA)])
    engine = catalog_engine(pg_url)
    with engine.begin() as connection:
        connection.execute(text("ANALYZE"))  # the statistics of a new, nearly empty catalog
    for pass_no in range(2, 12):  # past psycopg's prepare threshold (5) and PostgreSQL's (5)
        run_pass(work, pass_no, [m.GetLogicalSource("s")])
    with engine.connect() as connection:  # the passes' connection, back in the pool
        generic = connection.execute(
            text("SELECT statement FROM pg_prepared_statements WHERE generic_plans > 0")
        ).all()
        plan_cache_mode = connection.execute(text("SHOW plan_cache_mode")).scalar_one()
    assert generic == [], "statements of the passes were planned once for any values"
    # PostgreSQL's own foreign-key checks keep their plans: planned again for each row a pass
    # deletes, a pass dropping 533 logical sources spent 19 ms in them instead of 5 ms.
    assert plan_cache_mode == "auto"


def test_a_batch_of_keys_is_never_compared_with_each_row_of_a_small_table(pg_url: str) -> None:
    """``one_of``'s keys are a set the rows are joined with: on a table the planner takes for
    small, a scan comparing each row with every key (``= ANY``) took 93 ms in bench requests
    (1,318 rows, 2,978 keys)."""
    work = CatalogWork(pg_url)
    run_pass(work, 1, [m.CreateLogicalSource(f"s{i}", SCHEMA) for i in range(20)])
    engine = catalog_engine(pg_url)
    with engine.begin() as connection:
        connection.execute(text("ANALYZE logical_sources"))
    names = [f"s{i}" for i in range(3000)]
    with Session(engine) as session:
        statement = select(LogicalSource.name).where(one_of(session, LogicalSource.name, names))
        compiled = statement.compile(dialect=engine.dialect)
        plan = [
            line
            for (line,) in session.connection().exec_driver_sql(
                "EXPLAIN " + compiled.string, compiled.params
            )
        ]
        found = session.scalars(statement).all()
    assert sorted(found) == sorted(f"s{i}" for i in range(20))
    assert not [line for line in plan if "Filter" in line and "ANY" in line], plan

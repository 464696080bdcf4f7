"""Throw-away PostgreSQL databases for benchmarks and tests.

``scratch_database(server_url)`` creates a database with a unique name on the server that
``server_url`` points at (any database on it, used only to connect), yields the URL of the new
database, and drops it afterwards even when connections are still open.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import psycopg
from sqlalchemy.engine import make_url

from streamctl.catalog.store import dispose_all
from streamctl.catalog.urls import libpq_url, normalize_url


def postgres_unavailable(server_url: str) -> str | None:
    """Why no PostgreSQL server answers at ``server_url``, or None when one does."""
    try:
        with psycopg.connect(libpq_url(server_url), connect_timeout=3, autocommit=True):
            return None
    except Exception as error:
        return f"no PostgreSQL server at {server_url}: {error}"


@contextlib.contextmanager
def scratch_database(
    server_url: str, prefix: str = "streamctl", options: str = ""
) -> Iterator[str]:
    """``options``: SQL appended to ``CREATE DATABASE`` (a locale, a template)."""
    admin = libpq_url(server_url)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}" {options}')
    try:
        yield (
            make_url(normalize_url(server_url))
            .set(database=name)
            .render_as_string(hide_password=False)
        )
    finally:
        dispose_all()
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

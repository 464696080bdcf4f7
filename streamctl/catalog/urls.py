"""Catalog and PostgreSQL URLs, without importing a database library.

Spark's Python workers import the connector modules that use these, and they should not pay
for (or need) SQLAlchemy and Alembic to read a URL.

A catalog URL may carry a password. Whatever shows a URL to people or writes it where others
may read it (output, logs, ``stack.json``) shows :func:`streamctl.secret_options.redact_url` of
it instead.
"""

from __future__ import annotations


def normalize_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://`` URLs and use psycopg 3 for them."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def libpq_url(url: str) -> str:
    """``url`` as libpq reads it.

    One URL serves SQLAlchemy and psycopg (catalogs, PostgreSQL sinks, tests), and libpq does
    not know SQLAlchemy's ``postgresql+driver://`` schemes, so the driver part is dropped.
    """
    scheme, separator, rest = url.partition("://")
    if separator and scheme.startswith(("postgresql+", "postgres+")):
        return f"postgresql://{rest}"
    return url


def catalog_kind(url: str) -> str:
    """The database a catalog URL names (``sqlite``, ``postgresql``), never its credentials."""
    scheme = url.partition("://")[0].partition("+")[0].lower()
    return "postgresql" if scheme == "postgres" else scheme or "unknown"

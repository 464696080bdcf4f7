"""The catalog's three descriptions of one schema agree: migrations, ORM models, pass rows."""

from __future__ import annotations

import dataclasses

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from streamctl.catalog.models import Base
from streamctl.catalog.rows import ENTITY_ROWS
from streamctl.catalog.store import create_catalog_engine, migrate

pytestmark = pytest.mark.quick


def test_migrations_build_exactly_the_models_schema(catalog_url):
    engine = create_catalog_engine(catalog_url)
    try:
        migrate(engine)
        with engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    finally:
        engine.dispose()
    assert differences == []


def test_pass_rows_have_their_tables_columns_in_order():
    for row_type in ENTITY_ROWS:
        fields = [field.name for field in dataclasses.fields(row_type)]
        assert fields == [column.name for column in row_type.TABLE.columns], row_type.__name__
        assert row_type.KEY in fields

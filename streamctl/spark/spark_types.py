"""The Spark types that carry NebulaStream (NES) data types.

The catalog stores a schema as columns ``{"name", "type", "nullable"}`` whose types are NES
type names (:data:`streamctl.nes_types.NES_TYPES`, where the NES types themselves are
declared). This module is the single place that decides how each NES type is represented in
Spark; the plan translator, the source and sink connectors and the PostgreSQL sink all ask it.

Every Spark type below holds *every* value of its NES type (Spark has no unsigned integers,
so each unsigned type is carried by the next wider signed type):

========== ======================= ==================================================
NES type   Spark type              why
========== ======================= ==================================================
INT8       ByteType (TINYINT)      same range
INT16      ShortType (SMALLINT)    same range
INT32      IntegerType (INT)       same range
INT64      LongType (BIGINT)       same range
UINT8      ShortType (SMALLINT)    0..255 does not fit a signed byte
UINT16     IntegerType (INT)       0..65535 does not fit a signed short
UINT32     LongType (BIGINT)       0..4294967295 does not fit a signed int
UINT64     DecimalType(20, 0)      0..18446744073709551615 needs 20 digits; this is also
                                   what Spark's Parquet reader uses for UINT64
FLOAT32    FloatType (FLOAT)       IEEE single precision, as NES
FLOAT64    DoubleType (DOUBLE)     IEEE double precision, as NES
BOOLEAN    BooleanType (BOOLEAN)
CHAR       StringType (STRING)     one character; Spark's CHAR(n) is a padded string
                                   that only exists in table schemas
VARSIZED   StringType (STRING)     ``TEXT`` is NES's alias of ``VARSIZED``
========== ======================= ==================================================

The wider types keep values exact but not NES's *overflow* semantics: NES computes on the
machine type (``UINT8`` 255 + 1 wraps to 0); Spark computes on the carrier type. Connectors
check ranges when they parse input, so a source never yields a value outside its NES type.

The module imports nothing from pyspark at import time (the coordinator imports it without
a JVM); ``spark_type`` and ``spark_schema`` import pyspark when called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from streamctl.nes_types import canonical_type

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

__all__ = [
    "column_fields",
    "quote_identifier",
    "spark_ddl",
    "spark_schema",
    "spark_type",
    "spark_type_ddl",
]

_SPARK_DDL: dict[str, str] = {
    "INT8": "TINYINT",
    "INT16": "SMALLINT",
    "INT32": "INT",
    "INT64": "BIGINT",
    "UINT8": "SMALLINT",
    "UINT16": "INT",
    "UINT32": "BIGINT",
    "UINT64": "DECIMAL(20,0)",
    "FLOAT32": "FLOAT",
    "FLOAT64": "DOUBLE",
    "BOOLEAN": "BOOLEAN",
    "CHAR": "STRING",
    "VARSIZED": "STRING",
}


def spark_type_ddl(nes_type: str) -> str:
    """The Spark SQL type (DDL spelling, e.g. ``DECIMAL(20,0)``) carrying an NES type."""
    return _SPARK_DDL[canonical_type(nes_type)]


def spark_type(nes_type: str) -> DataType:
    """The pyspark ``DataType`` carrying an NES type (see the table in the module docstring)."""
    from pyspark.sql import types as T

    name = canonical_type(nes_type)
    factories: dict[str, DataType] = {
        "INT8": T.ByteType(),
        "INT16": T.ShortType(),
        "INT32": T.IntegerType(),
        "INT64": T.LongType(),
        "UINT8": T.ShortType(),
        "UINT16": T.IntegerType(),
        "UINT32": T.LongType(),
        "UINT64": T.DecimalType(20, 0),
        "FLOAT32": T.FloatType(),
        "FLOAT64": T.DoubleType(),
        "BOOLEAN": T.BooleanType(),
        "CHAR": T.StringType(),
        "VARSIZED": T.StringType(),
    }
    return factories[name]


def column_fields(column: Mapping[str, Any] | Any) -> tuple[str, str, bool]:
    """``(name, canonical type, nullable)`` of a catalog column (a dict or an object)."""
    if isinstance(column, Mapping):
        name, type_name, nullable = column["name"], column["type"], column.get("nullable", True)
    else:
        name, type_name = column.name, column.type
        nullable = getattr(column, "nullable", True)
    return str(name), canonical_type(type_name), bool(nullable)


def spark_schema(columns: Iterable[Mapping[str, Any] | Any]) -> StructType:
    """A Spark ``StructType`` with the catalog columns' names, Spark types and nullability."""
    from pyspark.sql import types as T

    fields = []
    for column in columns:
        name, type_name, nullable = column_fields(column)
        fields.append(T.StructField(name, spark_type(type_name), nullable))
    return T.StructType(fields)


def quote_identifier(name: str) -> str:
    """A Spark SQL identifier in backticks (embedded backticks doubled)."""
    return "`" + name.replace("`", "``") + "`"


def spark_ddl(columns: Iterable[Mapping[str, Any] | Any]) -> str:
    """The Spark DDL of catalog columns, e.g. ``\\`id\\` BIGINT NOT NULL, \\`v\\` DOUBLE``.

    Usable with ``DataStreamReader.schema`` and ``StructType.fromDDL``.
    """
    parts = []
    for column in columns:
        name, type_name, nullable = column_fields(column)
        not_null = "" if nullable else " NOT NULL"
        parts.append(f"{quote_identifier(name)} {_SPARK_DDL[type_name]}{not_null}")
    return ", ".join(parts)
